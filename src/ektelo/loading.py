"""Reading the analyst's table and domain (`Session`, `ektelo run`): a
Domain from JSON or a dict, and the domain's columns of a DataFrame, CSV or
Parquet file with invalid values handled by the `on_invalid` policy. This
is the data holder's side: it reads the private data before `protect`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .domain import Domain

if TYPE_CHECKING:  # pandas is imported where a table is read (#41)
    import pandas as pd

__all__ = ["DIAGNOSE_BYTES", "diagnosable", "load_domain", "load_table"]


def load_domain(domain: Domain | str | Path | dict[str, Any]) -> Domain:
    """A Domain from a Domain, a JSON file path, a JSON string or a dict.

    A spec that still carries `ektelo domain init`'s note (its labels and
    bounds were read from the private data) is refused until the data holder
    has reviewed it and deleted the note (`domain_template.check_not_template`).
    """
    from .domain_template import check_not_template

    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, dict):
        check_not_template(domain, "the domain")
        return Domain.from_dict(domain)
    if isinstance(domain, str | Path):
        text = str(domain)
        inline = text.lstrip().startswith("{")
        if not inline and not Path(text).is_file():
            raise FileNotFoundError(f"domain file not found: {text}")
        try:
            spec = json.loads(text if inline else Path(text).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            where = "the domain" if inline else text
            raise ValueError(f"{where}: not valid JSON ({exc})") from None
        check_not_template(spec, "the domain" if inline else text)
        return Domain.from_json(spec) if isinstance(spec, dict) else Domain.from_dict(spec)
    raise TypeError(f"domain must be a Domain, a JSON path or a dict, got {type(domain).__name__}")


def load_table(
    source: pd.DataFrame | str | Path,
    domain: Domain,
    *,
    on_invalid: str = "error",
    show_bad_values: bool = False,
) -> pd.DataFrame:
    """The domain's columns of a DataFrame, a CSV or a Parquet file, with
    invalid values handled by `on_invalid` (see `Domain.clean`)."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        frame = source
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"data file not found: {source}")
        if path.suffix.lower() in (".parquet", ".pq"):
            try:
                frame = pd.read_parquet(path)
            except ImportError:
                raise ImportError(
                    "reading Parquet needs pyarrow: pip install 'ektelo[parquet]'"
                ) from None
            except Exception as exc:
                raise ValueError(f"{source}: not a readable Parquet file ({exc})") from None
            repeated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
            if repeated:
                raise ValueError(f"{source}: the file repeats column name(s) {repeated}")
        else:
            try:
                return domain.read_csv(path, ignore_extra=True, show_bad_values=show_bad_values,
                                       on_invalid=on_invalid)
            except pd.errors.ParserError as exc:
                raise ValueError(f"{source}: malformed CSV ({str(exc).splitlines()[0]})") from None
            except pd.errors.EmptyDataError:
                raise ValueError(f"{source}: the file is empty") from None
            except UnicodeDecodeError:
                raise ValueError(f"{source}: not a text CSV file") from None
    missing = [n for n in domain.columns if n not in frame.columns]  # open ones kept as they are
    if missing:
        raise ValueError(f"missing column(s) {missing}; the domain needs {list(domain.columns)}")
    frame = frame[list(domain.columns)]
    if on_invalid == "error":
        domain.encode(frame, show_bad_values=show_bad_values)
        return frame
    return domain.clean(frame, on_invalid)


DIAGNOSE_BYTES = 256 << 20


def diagnosable(source: Any) -> bool:
    """Whether a refused file is small enough to be read into memory to explain it."""
    if not isinstance(source, str | Path) or str(source).startswith("duckdb://"):
        return False
    path = Path(source)
    return path.is_file() and path.stat().st_size <= DIAGNOSE_BYTES
