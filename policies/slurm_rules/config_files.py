"""Config files built from properties, as Slinky's internal/utils/config builds slurm.conf and sshd_config: a file
is key/value properties, under section headers where its format has them, written in its format's syntax. The
renders add properties; none writes a whole line as text, and none re-parses one afterwards.

`SlurmConfig` (slurm.conf, cgroup.conf, gres.conf) checks each property against the release when it is added
(slurm_options): an option the release calls defunct, or that it does not know, is refused there, with the config
key it came from where a person wrote it. Every file refuses a key set twice, unless the format keeps every line
of it (Slurm's node and partition definitions, sshd's HostKey).

Every whole file begins with `RENDERED_BY` where its format takes comments; a fragment that an operator copies
into its own file (`fragment()`, e.g. Slinky's extraConf) does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from . import slurm_options
from .slurm_release import SlurmRelease

RENDERED_BY = "rendered by slurm-platform; edits are overwritten"

Origin = tuple[object, ...]  # the stack config key path a person wrote a property at; () for the program's own


class RefusedProperty(ValueError):
    """A property the target file cannot take. `origin`: the config key path it came from (() for the program's own)."""

    def __init__(self, reason: str, origin: Origin = (), value: str = "") -> None:
        super().__init__(reason)
        self.reason, self.origin, self.value = reason, origin, value


class ConfigFile:
    """Properties `key<separator>value` in order, optionally under `[section]` headers."""

    def __init__(self, name: str, separator: str, comment: Optional[str] = "#", repeatable: Iterable[str] = ()) -> None:
        self.name = name  # for errors: "sssd.conf"
        self.separator = separator
        self.comment = comment
        self.repeatable = frozenset(key.lower() for key in repeatable)
        self._lines: list[str] = []
        self._keys: dict[tuple[str, ...], str] = {}  # what each key's line says, for the error on a repeat

    def set(self, key: str, value: object, origin: Origin = ()) -> ConfigFile:
        line = f"{key}{self.separator}{value}"
        self._claim((key.lower(),), line, origin)
        self._lines.append(line)
        return self

    def section(self, name: str) -> ConfigFile:
        """A `[name]` header; keys count again from here (each section has its own)."""
        if self._lines:
            self._lines.append("")
        self._lines.append(f"[{name}]")
        self._keys = {}
        return self

    def _claim(self, identity: tuple[str, ...], line: str, origin: Origin) -> None:
        if identity == (identity[0],) and identity[0] in self.repeatable:
            return  # a key the format keeps every line of
        if (earlier := self._keys.get(identity)) is not None:
            raise RefusedProperty(f"the rendered {self.name} already has {earlier}: a second line would replace it; remove this one", origin, line)
        self._keys[identity] = line

    def fragment(self) -> str:
        """The properties alone, one per line, for an operator to include in its own file."""
        return "\n".join(self._lines)

    def text(self) -> str:
        """The whole file: the RENDERED_BY line where the format takes comments, the properties, a final newline."""
        header = [f"{self.comment} {RENDERED_BY}"] if self.comment else []
        return "\n".join([*header, *self._lines]) + "\n"


# slurm.conf lines that each define one thing (a node, a node set, a partition): Slurm keeps every one, and
# refuses the same name twice unless it is DEFAULT. gres.conf's NodeName and Name lines likewise.
DEFINITIONS: dict[slurm_options.File, frozenset[str]] = {
    "slurm.conf": frozenset({"nodename", "nodeset", "partitionname", "downnodes", "frontendname", "include"}),
    "gres.conf": frozenset({"nodename", "name"}),
    "cgroup.conf": frozenset(),
}


class SlurmConfig(ConfigFile):
    """slurm.conf, cgroup.conf or gres.conf for one Slurm release: every property checked when it is added."""

    def __init__(self, release: SlurmRelease, file: slurm_options.File = "slurm.conf") -> None:
        super().__init__(file, "=", "#", DEFINITIONS[file])
        self.release, self.file = release, file

    def set(self, key: str, value: object, origin: Origin = ()) -> SlurmConfig:
        """A property the release must take: refused (RefusedProperty) if it calls it defunct or does not know it."""
        if not slurm_options.accepts(self.release, self.file, key, str(value)):
            reason = slurm_options.objection(self.release, self.file, key, str(value))
            raise RefusedProperty(f"{self.file} {key}={value}: {reason}", origin, f"{key}={value}")
        super().set(key, value, origin)
        return self

    def set_where_taken(self, key: str, value: object) -> SlurmConfig:
        """One of the program's own properties, written where the release takes it and left out where it does not
        (an option new after it, or retired by it). A key or value no release knows is refused all the same."""
        if slurm_options.accepts(self.release, self.file, key, str(value)):
            return self.set(key, value)
        if not slurm_options.known_anywhere(self.file, key, str(value)):
            reason = slurm_options.objection(self.release, self.file, key, str(value))
            raise RefusedProperty(f"{self.file} {key}={value}: {reason}", (), f"{key}={value}")
        return self

    def define(self, kind: str, name: str, options: Iterable[tuple[str, object]] = (), origin: Origin = ()) -> SlurmConfig:
        """A definition line, `kind=name` then its options (`NodeName=gpu-[0-3] CPUs=8 ...`, `PartitionName=...`),
        every option checked as the release reads that kind of line."""
        line = " ".join(f"{key}={value}" for key, value in [(kind, name), *options])
        if reason := slurm_options.line_objection(self.release, self.file, line):
            raise RefusedProperty(f"{self.file} {line}: {reason}", origin, line)
        if name.upper() != "DEFAULT":  # DEFAULT lines set defaults for the definitions after them: any number
            self._claim((kind.lower(), name), line, origin)
        self._lines.append(line)
        return self

    def line(self, text: str, origin: Origin = ()) -> SlurmConfig:
        """A line a person wrote (`Key=Value`, or a definition with its options), checked as the program's own."""
        pairs = [word.partition("=") for word in text.split()]
        if not pairs:
            return self
        (key, _, value), options = pairs[0], [(k, v) for k, _, v in pairs[1:]]
        if key.lower() in self.repeatable:
            return self.define(key, value, options, origin)
        if options:
            raise RefusedProperty(f"{self.file} {text}: one Key=Value per line (only definitions take options)", origin, text)
        return self.set(key, value, origin)


def options_text(release: SlurmRelease, kind: str, options: Iterable[tuple[str, object]], origin: Origin = ()) -> str:
    """A definition's options alone (`Gres=gpu:8`), checked as `SlurmConfig.define` checks them: for an operator
    field that takes them apart from the `kind=name` head it writes itself (Slinky's NodeSet extraConf, soperator's
    partition config)."""
    conf = SlurmConfig(release).define(kind, "checked", options, origin)
    return conf.fragment().split(" ", 1)[1] if " " in conf.fragment() else ""


def options_of(text: str) -> list[tuple[str, str]]:
    """`Key=Value Key=Value` (a partition's config as written in the stack config) as properties."""
    return [(key, value) for key, _, value in (word.partition("=") for word in text.split())]
