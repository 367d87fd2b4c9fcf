"""Gradescope's export layout: a submission_metadata.yml beside one folder per submission, naming each folder's
submitters (name, SID, email). Read with a safe YAML loader; a file that cannot be used is listed, never fatal.
Only the class root's file is read (class_root): the submission folders hold what students uploaded."""

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


def class_root(root: Path) -> Path:
    """The folder whose children are the class's rows: `root`, or the one folder it wraps (an unzipped export,
    `assignment_123_export/`), followed down while a folder holds no results.json and no metadata of its own and
    exactly one folder. A student's own folder is never a class root of the class it is in: it has siblings."""
    d = root
    for _ in range(8):  # an export wraps its rows in one or two folders; a deeper chain is not a class
        if not d.is_dir() or (d / GRADESCOPE_METADATA).exists() or (d / "results.json").exists():
            return d
        subs = [x for x in d.iterdir() if x.is_dir() and not x.name.startswith(".") and not x.is_symlink()]
        if len(subs) != 1 or (subs[0] / "results.json").exists():
            return d
        d = subs[0]
    return d


def is_row_folder(name: str) -> bool:
    """A name the metadata may give a row: one folder directly in the class root. Not `.` or `..`, nothing with a
    separator: the export names its own folders (submission_123), and no entry may point outside them."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\0" not in name


def gradescope_layout(root: Path) -> tuple[dict[Path, list[dict[str, str]]], list[Unreadable]]:
    """Every submission folder named in the submission_metadata.yml of the class root (class_root: root or the one
    folder it wraps) -> its submitters. Only that file: one in a row's folder is the student's own upload (a
    Gradescope submission may hold any file), and must not name anyone's submitters, its own row's included."""
    found: dict[Path, list[dict[str, str]]] = {}
    bad: list[Unreadable] = []
    meta = class_root(root) / GRADESCOPE_METADATA
    if not meta.is_file():
        return found, bad
    try:
        folders = read_gradescope_metadata(meta)
    except BadResults as e:
        return found, [Unreadable(rel(meta, root), str(e))]
    top = meta.parent.resolve()
    for name, people in folders.items():
        if not is_row_folder(name):
            bad.append(Unreadable(rel(meta, root), f"names {name[:60]!r}, not a folder of the export: entry ignored"))
            continue
        found[(top / name).resolve()] = people
    return found, bad
