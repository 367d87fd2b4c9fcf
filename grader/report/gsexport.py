"""Gradescope's export layout: a submission_metadata.yml beside one folder per submission, naming each folder's
submitters (name, SID, email). Read with a safe YAML loader; a file that cannot be used is listed, never fatal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.report.validate import BadResults, Unreadable, rel

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 32 * 1024 * 1024


def _yaml_loader() -> Any:
    """yaml.SafeLoader that reads a Ruby-tagged node (`!ruby/object:BigDecimal ...`, which Gradescope's Ruby
    exporter may write) as plain data instead of refusing the whole file. Builds no Python object from a tag."""
    import yaml

    Loader: Any = type("Loader", (yaml.SafeLoader,), {})  # its own class: the constructor added below stays here

    def plain(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    Loader.add_multi_constructor("!", plain)
    Loader.add_multi_constructor("tag:", plain)
    return Loader


def _field(d: Any, name: str) -> Any:
    """d[':name'] (Ruby symbol keys, as Gradescope writes them) or d['name']."""
    if not isinstance(d, dict):
        return None
    return d.get(f":{name}", d.get(name))


def _text(v: Any, limit: int = 1000) -> str:
    return str(v).strip()[:limit] if isinstance(v, (str, int)) and not isinstance(v, bool) else ""


def read_gradescope_metadata(path: Path) -> dict[str, list[dict[str, str]]]:
    """submission_metadata.yml -> submission folder name -> its submitters [{name, sid, email}]. Raises
    BadResults naming what is wrong."""
    import yaml

    try:
        size = path.stat().st_size
        if size > MAX_METADATA_BYTES:
            raise BadResults(f"{size / 2**20:.1f} MiB, over the {MAX_METADATA_BYTES // 2**20} MiB it may be")
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader())  # a SafeLoader
    except BadResults:
        raise
    except OSError as e:
        raise BadResults(f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise BadResults("not UTF-8 text") from None
    except Exception as e:  # YAMLError, and whatever else hostile YAML raises: listed, never fatal
        raise BadResults(f"not YAML: {' '.join(str(e).split())[:200]}") from None
    if not isinstance(data, dict):
        raise BadResults("not Gradescope's submission metadata (a mapping of submission folders)")
    out: dict[str, list[dict[str, str]]] = {}
    for folder, sub in data.items():
        people = _field(sub, "submitters")
        if not isinstance(folder, str) or not isinstance(people, list):
            continue
        rows = [{k: _text(_field(p, k)) for k in ("name", "sid", "email")} for p in people[:50] if isinstance(p, dict)]
        out[folder.lstrip(":")] = [r for r in rows if any(r.values())]
    return out


def gradescope_layout(root: Path) -> tuple[dict[Path, list[dict[str, str]]], list[Unreadable]]:
    """Every submission folder named in a submission_metadata.yml at root or one level down -> its submitters."""
    found: dict[Path, list[dict[str, str]]] = {}
    bad: list[Unreadable] = []
    candidates = [root / GRADESCOPE_METADATA, *sorted(root.glob(f"*/{GRADESCOPE_METADATA}"))] if root.is_dir() else []
    for meta in candidates:
        if not meta.is_file():
            continue
        try:
            folders = read_gradescope_metadata(meta)
        except BadResults as e:
            bad.append(Unreadable(rel(meta, root), str(e)))
            continue
        for name, people in folders.items():
            found[(meta.parent / name).resolve()] = people
    return found, bad
