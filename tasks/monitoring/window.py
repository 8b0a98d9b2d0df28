"""A window of the model server's prediction log (servers/model/prediction_log.py: a folder an hour of Parquet
files): the items served in (start, end], read from the hour folders that window touches."""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HOUR_FORMAT = "%Y-%m-%dT%H"  # the log's folder names (UTC)


@dataclass(frozen=True)
class Window:
    """The served items' time span a monitor run compares: `minutes` up to `end` (UTC)."""
    end: datetime
    minutes: float

    @property
    def start(self) -> datetime:
        return self.end - timedelta(minutes=self.minutes)

    @property
    def slot(self) -> int:
        """Which window-long slot of time (counted from the epoch) `end` falls in: two monitor runs in one slot are
        one window's, and start at most one retraining between them."""
        return math.floor(self.end.timestamp() / (self.minutes * 60))

    def __str__(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M:%S}..{self.end:%H:%M:%S} UTC"


def window_ending(end: datetime | None, minutes: float) -> Window:
    """The window of `minutes` up to `end` (now when None; a naive time is UTC)."""
    end = end or datetime.now(timezone.utc)
    return Window(end if end.tzinfo else end.replace(tzinfo=timezone.utc), minutes)


def hour_folders(folder: Path, window: Window) -> list[Path]:
    """The log's hour folders that hold items of the window (those that exist)."""
    hour = window.start.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
    found = []
    while hour <= window.end:
        if (folder / hour.strftime(HOUR_FORMAT)).is_dir():
            found.append(folder / hour.strftime(HOUR_FORMAT))
        hour += timedelta(hours=1)
    return found


def served_rows(folder: Path, window: Window) -> Any:
    """The logged items of the window (a pandas DataFrame of the log's columns; empty when none)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from servers.model.prediction_log import schema
    tables = [pq.read_table(part, schema=schema()) for hour in hour_folders(folder, window)
              for part in sorted(hour.glob("part-*.parquet"))]
    rows = pa.concat_tables(tables).to_pandas() if tables else schema().empty_table().to_pandas()
    times = pd.to_datetime(rows["time"], utc=True)
    return rows[(times > pd.Timestamp(window.start)) & (times <= pd.Timestamp(window.end))].reset_index(drop=True)
