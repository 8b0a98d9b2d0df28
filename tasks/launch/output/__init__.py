"""Reading what ranks print: the rank-line protocol's launcher side, why a job failed, metrics relayed to MLflow."""
