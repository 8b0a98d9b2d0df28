"""The long-running servers ringflow starts, in one home under one supervisor (processes.py): the local Prefect
server a flow starts (local_prefect.py), the team's services (make services), make serve, and the model server
(model/, make serve-model)."""
