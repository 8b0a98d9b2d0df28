"""make serve-model: python -m servers.model [--set serving.port=8502 ...] [--wait-for-champion]: the registry's
champion over HTTP until Ctrl-C (params.yaml's serving section; the registry of its tracking and registry sections).
TensorFlow's own C++ log says errors only when fatal here (TF_CPP_MIN_LOG_LEVEL 3): a request TensorFlow fails is
one line of the server's own."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from typing import Any, Iterator

import numpy as np

from servers.model.app import Limits, serving_app
from servers.model.batcher import Batcher
from servers.model.champion import Champion, ChampionWatcher, log
from servers.model.prediction_log import PredictionLog
from servers.model.served_model import NotServable, ServedModel, champion_version, load_version, no_champion
from tasks import logs
from tasks.errors import INTERRUPTED_EXIT, report
from tasks.params import Params, ParamsError, load_params, parse_assignments
from tasks.paths import prediction_log_dir
from tasks.tracking.model_registry import CHALLENGER, encoded_examples
from tasks.tracking.server import use_tracking


def listening_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on host:port (bound with SO_REUSEADDR, as uvicorn does), or None."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            return f"cannot listen on {host}:{port} ({error.strerror}): set serving.port (or stop what holds it)"
    return None


@contextlib.contextmanager
def native_stderr_quiet() -> Iterator[None]:
    """TensorFlow's C++ libraries say at import and first use what this machine lacks (CUDA, AVX-512), before or
    despite TF_CPP_MIN_LOG_LEVEL: not in the server's terminal, whose lines are its own (Python's errors are raised
    after, and shown)."""
    sys.stderr.flush()
    kept = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(kept, 2)
        os.close(kept)


def first_champion(params: Params, warm_up: list[bytes], wait: bool) -> ServedModel:
    """The champion now, loaded; ParamsError/NotServable (one line, exit 2) when there is none to serve (with
    `wait`: said once, then asked again every poll_seconds until a champion that can be served)."""
    use_tracking(params.tracking)
    if problem := listening_problem(params.serving.host, params.serving.port):
        raise ParamsError(problem)
    name, refused, said = params.registry.model_name, set[str](), ""
    while True:
        version, waiting = champion_version(name), no_champion(name)
        if version is not None and version in refused:
            waiting = said  # said when it was refused
        elif version is not None:
            try:
                with native_stderr_quiet():  # TensorFlow's import and first graph
                    return load_version(name, version, warm_up)
            except NotServable as error:
                if not wait:
                    raise
                refused.add(version)
                waiting = f"{error}: waiting for another champion"
        elif not wait:
            raise ParamsError(no_champion(name))
        if waiting != said:
            log.info(f"{waiting}; until then, asked every {params.serving.poll_seconds:g} s")
            said = waiting
        time.sleep(params.serving.poll_seconds)


def timed_h11(read_timeout: float) -> type:
    """uvicorn's h11 protocol, closing a connection that has not sent a whole request's headers within read_timeout
    of its opening or of its last answer (uvicorn times out neither: a silent or slow client held its connection,
    and serving.max_connections of them every other client, for ever)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11(H11Protocol):
        _headers_due: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._wait_for_headers()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._wait_for_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
            super().connection_lost(exc)

        def _wait_for_headers(self) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
            self._headers_due = self.loop.call_later(read_timeout, self._headers_late, self.cycle)

        def _headers_late(self, cycle: Any) -> None:
            if self.cycle is cycle and not self.transport.is_closing():  # no new request since: close
                self.transport.close()
    return TimedH11


def serve(params: Params, wait: bool) -> None:
    """Serve until uvicorn stops (a signal: re-raised by uvicorn once every answer is sent)."""
    import uvicorn
    settings = params.serving
    warm_up = encoded_examples(np.zeros((1, 8, 8, 1), np.float32))
    champion = Champion(first_champion(params, warm_up, wait), settings.challenger)
    batcher = Batcher(settings.max_batch_size, settings.max_wait_ms / 1000, settings.max_queued_requests)
    predictions = PredictionLog(prediction_log_dir(settings.log_dir), settings.log_fraction,
                                settings.log_max_per_second) if settings.log_fraction else None
    app = serving_app(champion, batcher, Limits(settings.max_request_bytes, settings.max_instances,
                                                settings.max_image_pixels, settings.read_timeout_seconds), predictions)
    watcher = ChampionWatcher(champion, settings.poll_seconds,
                              (lambda: predictions.warm_up(warm_up)) if predictions is not None else warm_up)
    model, url = champion.model, f"http://{settings.host}:{settings.port}"
    challenger = f" (/labels/{CHALLENGER}:predict: the {CHALLENGER})" if settings.challenger else ""
    log.info(f"{model.name} v{model.version} (the champion; loaded in {model.load_seconds:.1f} s) at {url}: POST "
        f"/v1/models/{model.name}:predict{challenger} and /invocations; GET /v1/models/{model.name} and /health. "
        "Ctrl-C stops")
    try:
        uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                                      access_log=False, timeout_graceful_shutdown=10,
                                      http=timed_h11(settings.read_timeout_seconds),
                                      limit_concurrency=settings.max_connections,
                                      timeout_keep_alive=settings.keep_alive_seconds)).run()  # type: ignore[arg-type]
    finally:
        watcher.close()
        batcher.close()
        if predictions is not None:
            predictions.close()


def main(argv: list[str] | None = None) -> int:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # before TensorFlow is imported
    # Ctrl-C stops it even where SIGINT was ignored when this process started (make in a background job, a CI
    # runner): uvicorn hands the signal on to the handler it found, and an ignored one would end it as if asked to
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(prog="python -m servers.model", description=__doc__)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter of params.yaml (e.g. serving.port=8502)")
    parser.add_argument("--wait-for-champion", action="store_true",
                        help="no champion yet: wait for one (make serve, before its first training) instead of failing")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors in the server's log")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug lines too")
    args = parser.parse_args(argv)
    logs.setup(logs.level_of(args.quiet, args.verbose))
    try:
        serve(load_params(parse_assignments(args.overrides)), args.wait_for_champion)
    except KeyboardInterrupt:
        log.info("stopped (Ctrl-C)")
        return INTERRUPTED_EXIT
    except Exception as error:  # one line, last, instead of a traceback
        return report(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
