"""The versions that answer, by the registry's aliases (the champion; with serving.challenger, the challenger too),
and the thread that follows the aliases: when one moves, the new version is loaded beside the ones answering and
swapped in once it has answered its warm-up (no request waits for a load, none is dropped); a challenger promoted
to champion answers as champion at once (it is loaded already); a version that cannot be served is said once and
the one answering stays."""
from __future__ import annotations

import threading
from typing import Callable

from servers.model.served_model import NotServable, ServedModel, aliased_versions, load_version
from tasks.logs import logger
from tasks.tracking.model_registry import CHALLENGER, CHAMPION

log = logger("serve-model")  # the server's log (its terminal): [serve-model] ...


class Champion:
    """The served versions by alias (read by every request), and what the server says of its versions."""

    def __init__(self, model: ServedModel, with_challenger: bool = False) -> None:
        self.labels: dict[str, ServedModel] = {CHAMPION: model}
        self.served_labels = (CHAMPION, CHALLENGER) if with_challenger else (CHAMPION,)
        self.loading: str | None = None  # a version being loaded now
        self.refused: dict[str, str] = {}  # versions that cannot be served, and why

    @property
    def model(self) -> ServedModel:
        """The champion: what a request naming no version nor label gets."""
        return self.labels[CHAMPION]

    def current(self) -> ServedModel:
        return self.labels[CHAMPION]

    def labelled(self, label: str) -> ServedModel | None:
        return self.labels.get(label)

    def of_version(self, version: str) -> ServedModel | None:
        return next((model for model in self.labels.values() if model.version == version), None)

    def versions(self) -> list[ServedModel]:
        """Each version answering, once (the champion first), whatever aliases it holds."""
        return list({model.version: model for model in self.labels.values()}.values())

    def relabel(self, label: str, model: ServedModel | None) -> ServedModel | None:
        """`label`'s requests answered by `model` (None: no version) from the next one on; returns the version it
        held, when no other label holds it now (retired)."""
        previous = self.labels.get(label)
        self.labels = {**{held: served for held, served in self.labels.items() if held != label},
                       **({label: model} if model is not None else {})}
        return previous if previous is not None and self.of_version(previous.version) is None else None


class ChampionWatcher:
    """Asks the registry every poll_seconds (and once at its start) which versions hold the aliases served, and
    swaps a new one in. A version that cannot be served (`load` raised NotServable: not the pipeline's, changed
    since it was registered, does not load) is said once and never downloaded again, wherever the alias goes
    meanwhile; the champion's alias removed is said once, and the served version stays; the challenger's removed:
    no version answers as challenger."""

    def __init__(self, champion: Champion, poll_seconds: float, warm_up: list[bytes] | Callable[[], list[bytes]],
                 ask: Callable[[str], dict[str, str]] = aliased_versions,
                 load: Callable[[str, str, list[bytes]], ServedModel] = load_version) -> None:
        self._champion, self._poll, self._warm_up, self._ask, self._load = champion, poll_seconds, warm_up, ask, load
        self._stop = threading.Event()
        self._registry_away = False
        self._no_alias = False  # the champion's alias was found removed (said once)
        self._failing: str | None = None  # a version whose download or load failed (said once; tried again)
        self._thread = threading.Thread(target=self._run, name="champion-watcher", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop asking; a question or a load under way is left to end with the process (a registry that does not
        answer may hold it for tracking.retry_minutes)."""
        self._stop.set()
        self._thread.join(timeout=1)

    def _run(self) -> None:
        while True:
            asked, aliases = self._asked()
            if asked:
                self._say_alias(self._champion.model, aliases.get(CHAMPION))
                for label in self._champion.served_labels:
                    self._follow(label, aliases.get(label))
            if self._stop.wait(self._poll):
                return

    def _asked(self) -> tuple[bool, dict[str, str]]:
        """(whether the registry answered, the versions holding each alias now); a registry that does not answer
        is said once per outage."""
        try:
            aliases = self._ask(self._champion.model.name)
        except Exception as error:  # the registry away or failing: keep answering with the models loaded
            if not self._registry_away:
                log.info(f"the registry does not answer ({type(error).__name__}: {str(error)[:200]}): still serving "
                    f"v{self._champion.model.version}, asking again every {self._poll:g} s")
            self._registry_away = True
            return False, {}
        if self._registry_away:
            log.info("the registry answers again")
        self._registry_away = False
        return True, aliases

    def _say_alias(self, served: ServedModel, version: str | None) -> None:
        """The champion's alias removed, once; and once it is back on the served version."""
        if version is None and not self._no_alias:
            log.info(f"{served.name}: no version holds the alias {CHAMPION} now: still serving v{served.version}")
        elif version is not None and self._no_alias and version == served.version:
            log.info(f"{served.name}: the alias {CHAMPION} is on v{version} again")
        self._no_alias = version is None

    def _follow(self, label: str, version: str | None) -> None:
        """Answer `label`'s requests with `version`: the one answering already, a version loaded for another
        label, or one loaded now beside them."""
        served, name = self._champion.labelled(label), self._champion.model.name
        if version is None:
            if label != CHAMPION and served is not None:  # the champion stays when its alias goes (said above)
                self._champion.relabel(label, None)
                log.info(f"{name}: no version holds the alias {label} now: v{served.version} answers as {label} no "
                         "more")
            return
        if (served is not None and served.version == version) or version in self._champion.refused:
            return
        model, how = self._champion.of_version(version), "loaded already"
        if model is None:
            if (loaded := self._loaded(name, version, label)) is None:
                return
            model, warmed = loaded
            how = f"loaded and warmed with {warmed} image{'' if warmed == 1 else 's'} in {model.load_seconds:.1f} s"
        retired = self._champion.relabel(label, model)
        now = "answers now" if label == CHAMPION else f"answers as {label} now"
        log.info(f"{name} v{version} {now} ({how}" + (f"; v{retired.version} retired)" if retired else ")"))

    def _loaded(self, name: str, version: str, label: str) -> tuple[ServedModel, int] | None:
        """The version loaded and warmed up, and how many images warmed it; None when it cannot be (said once)."""
        self._champion.loading = version
        answering = self._champion.labelled(label)
        if self._failing != version:
            still = f" (v{answering.version} answers)" if answering is not None else ""
            log.info(f"{name}: the {label} is v{version} now: loading it{still}")
        images = self._warm_up() if callable(self._warm_up) else self._warm_up  # served ones, when there are
        try:
            model = self._load(name, version, images)
        except NotServable as error:
            self._champion.refused[version] = str(error)
            log.info(f"{error}; still serving v{self._champion.model.version}")
            return None
        except Exception as error:  # a download that failed (the registry or its artifacts away): tried again
            if self._failing != version:
                log.info(f"{name} v{version} did not download ({type(error).__name__}: {str(error)[:200]}): tried "
                         f"again every {self._poll:g} s")
            self._failing = version
            return None
        finally:
            self._champion.loading = None
        self._failing = None
        return model, len(images)
