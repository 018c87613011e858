"""Reading and writing registry records (YAML, through PyYAML's safe loader and dumper).

Reading refuses, each with one line naming the file: a file larger than :data:`MAX_RECORD_BYTES` (by its size,
before parsing), text that is not UTF-8, YAML that does not parse (with the line), a mapping with a duplicated key
(YAML would silently keep the last), and aliases (``*name``: a record never needs them, and expanding them is how a
small file becomes a huge document). Writing uses block style, keeps the registry's key order, and writes multi-line
text as literal blocks (``|``), the quoting style the registry's checks ask for.

Example:
    >>> text = dump_record({"url_slug": "x", "deployment": {"basic": {"description": "line one\\nline two"}}})
    >>> print(text, end="")
    url_slug: x
    deployment:
      basic:
        description: |-
          line one
          line two
    >>> parse_yaml_text("a: 1\\na: 2\\n", name="r.yaml")
    Traceback (most recent call last):
    ...
    ValueError: 'r.yaml' is not a valid registry record: duplicate key 'a' (line 2)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["MAX_RECORD_BYTES", "dump_record", "parse_yaml_text", "read_yaml_document"]

#: Largest record file read (real records are a few kilobytes).
MAX_RECORD_BYTES = 2**20


def _loader_class() -> type:
    import yaml

    class RecordLoader(yaml.SafeLoader):
        """The safe loader, refusing aliases and duplicated keys."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, "YAML aliases are not allowed", event.start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return RecordLoader


def parse_yaml_text(text: str, *, name: str, what: str = "registry record") -> Any:
    """The one YAML document in ``text``; a ``ValueError`` naming ``name`` and the reason (with its line) otherwise."""
    import yaml

    try:
        return yaml.load(text, Loader=_loader_class())  # a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = err.problem or err.context or "unreadable YAML"
        raise ValueError(f"{name!r} is not a valid {what}: {problem}{where}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{name!r} is not a valid {what}: {str(err).splitlines()[0]}") from None
    except RecursionError:
        raise ValueError(f"{name!r} is nested too deeply to be a {what}") from None


def read_yaml_document(path: str | Path, *, what: str = "registry record", max_bytes: int = MAX_RECORD_BYTES) -> Any:
    """Read and parse a YAML file: refused by size before parsing, then as :func:`parse_yaml_text`."""
    from dplens._files import read_input_bytes

    path = Path(path)
    raw = read_input_bytes(path, what=what, max_bytes=max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} {str(path)!r} is not UTF-8 text") from None
    return parse_yaml_text(text, name=str(path), what=what)


def dump_record(record: dict[str, Any]) -> str:
    """A record as YAML text: block style, the given key order, multi-line strings as literal blocks."""
    import yaml

    class RecordDumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    RecordDumper.add_representer(str, text)
    return yaml.dump(
        record,
        Dumper=RecordDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=10**6,  # one line per scalar: folding long lines helps no reader of the registry's site
    )
