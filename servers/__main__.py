"""python -m servers: the servers ringflow runs (scripts/services.sh and scripts/serve.sh call this).

  services up | down                       make services (in the foreground) | make services-down
  services stop mlflow|prefect [--kill]    one server away (maintenance, or a crash to try)
  services start mlflow|prefect            and back, on the same data
  serve [deploy]                           make serve | only the work pool(s) and deployments, on PREFECT_API_URL

  --quiet (-q): only warnings and errors; --verbose (-v): debug lines too (tasks/logs.py)
"""
from __future__ import annotations

import sys

from servers import services
from servers.deploy import DeployFailed, deploy
from servers.processes import ServerFailed
from servers.serve import serve
from servers.setup import Place
from tasks import logs

USAGE = ("usage: scripts/services.sh up | down | stop mlflow|prefect [--kill] | start mlflow|prefect; "
         "scripts/serve.sh [serve | deploy]")


def command(argv: list[str]) -> int:
    """The verb's exit code; ServerFailed and DeployFailed for one error line."""
    match argv:
        case ["services"] | ["services", "up"]:
            return services.up(Place())
        case ["services", "down"]:
            return services.down(Place())
        case ["services", "stop", ("mlflow" | "prefect") as name, *rest] if rest in ([], ["--kill"]):
            return services.pause(Place(), name, kill=bool(rest))
        case ["services", "start", ("mlflow" | "prefect") as name]:
            return services.resume(Place(), name)
        case ["serve"] | ["serve", "serve"]:
            return serve()
        case ["serve", "deploy"]:
            deploy()
            return 0
    print(f"error: {USAGE}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    quiet, verbose = {"-q", "--quiet"} & set(words), {"-v", "--verbose"} & set(words)
    logs.setup(logs.level_of(quiet=bool(quiet), verbose=bool(verbose)))
    try:
        return command([word for word in words if word not in quiet | verbose])
    except (ServerFailed, DeployFailed) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
