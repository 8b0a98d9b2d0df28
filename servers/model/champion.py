"""The model that answers, and the thread that follows the registry's champion: when the alias moves, the new
version is loaded beside the one answering and swapped in once it has answered its warm-up (no request waits for
a load, none is dropped); a version that cannot be served is said once and the one answering stays."""
from __future__ import annotations

import threading
from typing import Callable

from servers.model.served_model import NotServable, ServedModel, champion_version, load_version
from tasks.logs import logger
from tasks.tracking.model_registry import CHAMPION

log = logger("serve-model")  # the server's log (its terminal): [serve-model] ...


class Champion:
    """The served model (read by every batch) and what the server says of its versions."""

    def __init__(self, model: ServedModel) -> None:
        self.model = model
        self.loading: str | None = None  # a version being loaded now
        self.refused: dict[str, str] = {}  # versions that cannot be served, and why

    def current(self) -> ServedModel:
        return self.model

    def swap(self, model: ServedModel) -> ServedModel:
        """Answer with `model` from the next batch on; returns the one it replaces."""
        previous, self.model = self.model, model
        return previous


class ChampionWatcher:
    """Asks the registry every poll_seconds which version is the champion, and swaps a new one in. A version that
    cannot be served (`load` raised NotServable: not the pipeline's, changed since it was registered, does not
    load) is said once and never downloaded again, wherever the alias goes meanwhile; the alias removed is said
    once, and the served version stays."""

    def __init__(self, champion: Champion, poll_seconds: float, warm_up: list[bytes] | Callable[[], list[bytes]],
                 ask: Callable[[str], str | None] = champion_version,
                 load: Callable[[str, str, list[bytes]], ServedModel] = load_version) -> None:
        self._champion, self._poll, self._warm_up, self._ask, self._load = champion, poll_seconds, warm_up, ask, load
        self._stop = threading.Event()
        self._registry_away = False
        self._no_alias = False  # the alias was found removed (said once)
        self._failing: str | None = None  # a version whose download or load failed (said once; tried again)
        self._thread = threading.Thread(target=self._run, name="champion-watcher", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop asking; a question or a load under way is left to end with the process (a registry that does not
        answer may hold it for tracking.retry_minutes)."""
        self._stop.set()
        self._thread.join(timeout=1)

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            asked, version = self._asked()
            served = self._champion.model
            if asked:
                self._say_alias(served, version)
            if version is not None and version != served.version and version not in self._champion.refused:
                self._follow(served.name, version)

    def _asked(self) -> tuple[bool, str | None]:
        """(whether the registry answered, the champion's version now: None when the alias is on no version);
        a registry that does not answer is said once per outage."""
        try:
            version = self._ask(self._champion.model.name)
        except Exception as error:  # the registry away or failing: keep answering with the model loaded
            if not self._registry_away:
                log.info(f"the registry does not answer ({type(error).__name__}: {str(error)[:200]}): still serving "
                    f"v{self._champion.model.version}, asking again every {self._poll:g} s")
            self._registry_away = True
            return False, None
        if self._registry_away:
            log.info("the registry answers again")
        self._registry_away = False
        return True, version

    def _say_alias(self, served: ServedModel, version: str | None) -> None:
        """The alias removed, once; and once it is back on the served version."""
        if version is None and not self._no_alias:
            log.info(f"{served.name}: no version holds the alias {CHAMPION} now: still serving v{served.version}")
        elif version is not None and self._no_alias and version == served.version:
            log.info(f"{served.name}: the alias {CHAMPION} is on v{version} again")
        self._no_alias = version is None

    def _follow(self, name: str, version: str) -> None:
        """Load the new champion beside the served one, then swap it in."""
        self._champion.loading = version
        if self._failing != version:
            log.info(f"{name}: the champion is v{version} now: loading it (v{self._champion.model.version} answers)")
        images = self._warm_up() if callable(self._warm_up) else self._warm_up  # served ones, when there are
        try:
            model = self._load(name, version, images)
        except NotServable as error:
            self._champion.refused[version] = str(error)
            log.info(f"{error}; still serving v{self._champion.model.version}")
            return
        except Exception as error:  # a download that failed (the registry or its artifacts away): tried again
            if self._failing != version:
                log.info(f"{name} v{version} did not download ({type(error).__name__}: {str(error)[:200]}): tried "
                         f"again every {self._poll:g} s")
            self._failing = version
            return
        finally:
            self._champion.loading = None
        self._failing = None
        previous = self._champion.swap(model)
        log.info(f"{name} v{version} answers now (loaded and warmed with {len(images)} images in "
                 f"{model.load_seconds:.1f} s; v{previous.version} retired)")
