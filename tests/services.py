"""The services tier's harness: real daemons from Debian's packages, fed what the program renders.

Slurm and munge run from a root filesystem per Slurm generation (`GENERATIONS`: Debian's
bookworm, trixie and forky, built and cached by `scripts/services-local.sh rootfs`), by
chroot; MariaDB and OpenLDAP are the host's packages (`scripts/services-local.sh install`).

Everything runs in one private mount namespace per lab, held by an `unshare`d
`sleep`: the host's /etc is never written; the lab's own /etc/passwd, /etc/group,
/etc/hosts, /etc/slurm, /etc/munge and the daemons' socket directories are bind
mounts of files in the test's directory, and vanish with the namespace. A lab of a
generation sees its root filesystem through an overlay (the cached tree is never
written) with the same binds, the host's /proc, /dev and /sys, and the test's
directory at its own path. Every daemon runs in the foreground as a child of the
test, on 127.0.0.1 or a Unix socket, and is stopped by its PID (`Lab.close`), pass or fail.

The rendered text goes to the daemons verbatim except for site lines, which
`site_line` alone rewrites: host names to 127.0.0.1, fixed ports to the lab's, and paths into the test's
directory. A line the generation's Slurm refuses fails the test that renders it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Optional

import pytest
from slurm_rules import confinement

from tests.harness import ROOT, stack_config, without_keys_unread_by

SCRIPT = ROOT / "scripts" / "services-local.sh"

# The Slurm generations the tier runs: each Slurm release, the Debian suite whose packages ship it.
GENERATIONS = {"22.05": "bookworm", "24.11": "trixie", "26.05": "forky"}


def require_packages() -> None:
    """The tier fails (never skips) where the packages are missing, with the command that installs them."""
    checked = subprocess.run([str(SCRIPT), "check"], capture_output=True, text=True)
    if checked.returncode != 0:
        pytest.fail(f"the services tier needs Debian packages:\n{checked.stderr}")


@functools.cache
def rootfs(release: str) -> Path:
    """The root filesystem of Slurm `release`'s generation: built (minutes, once per package list) where
    missing; where it cannot be, the test fails with the command that builds it."""
    suite = GENERATIONS[release]
    built = subprocess.run([str(SCRIPT), "rootfs", suite], capture_output=True, text=True)
    if built.returncode != 0:
        command = subprocess.run([str(SCRIPT), "rootfs-command", suite], capture_output=True, text=True).stdout.strip()
        pytest.fail(f"no root filesystem for Slurm {release} (Debian {suite}):\n{built.stderr[-3000:]}\nbuild it with: {command}")
    path = Path(built.stdout.strip())
    version = subprocess.run(["chroot", str(path), "slurmctld", "-V"], capture_output=True, text=True).stdout
    assert re.fullmatch(rf"slurm(-wlm)? {re.escape(release)}\.\d+\s*", version), f"{path} holds {version!r}, not Slurm {release}"
    return path


# A config line's key and its separator: Slurm's `Key=`, sssd's `key = `, nslcd's `key `.
CONFIG_KEY = re.compile(r"^(\s*[^=\s]+\s*=\s*|\s*[^=\s]+\s+)(?=\S)")


def site_line(line: str, hosts: Iterable[str] | Mapping[str, str], paths: Mapping[str, Path], ports: Mapping[str, int]) -> str:
    """The one place a rendered line is changed for this machine: a value naming one of `hosts`
    becomes 127.0.0.1 (or, given a mapping, its address there: `host:port` to `127.0.0.1:port`),
    a path under one of `paths`' keys moves to its test directory, and a `ports` key (`SlurmdPort`)
    takes the lab's port (other labs, of other checkouts too, may be running)."""
    match = CONFIG_KEY.match(line)
    if not match:
        return line
    key, value = match[1], line[match.end() :]
    if key.rstrip("= ") in ports:
        return f"{key}{ports[key.rstrip('= ')]}"
    addresses = dict(hosts) if isinstance(hosts, Mapping) else dict.fromkeys(hosts, "127.0.0.1")
    if key == "SlurmctldHost=" and value.split("(")[0] in addresses:
        # slurmctld starts only where its host name matches: on this machine, that is "localhost".
        return f"{key}localhost(127.0.0.1)"
    for host, address in addresses.items():
        value = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", address, value)
    for prefix, target in sorted(paths.items(), key=lambda item: -len(item[0])):
        if value == prefix or value.startswith(prefix.rstrip("/") + "/"):
            value = str(target) + value[len(prefix.rstrip("/")) :]
    return f"{key}{value}"


def for_this_machine(
    text: str, hosts: Iterable[str] | Mapping[str, str] = (), paths: Optional[Mapping[str, Path]] = None, ports: Optional[Mapping[str, int]] = None
) -> str:
    """Rendered config text (any daemon's) with its site lines mapped."""
    hosts = hosts if isinstance(hosts, Mapping) else tuple(hosts)
    return "".join(site_line(line, hosts, paths or {}, ports or {}) + "\n" for line in text.splitlines())


def etc_digest() -> dict[str, str]:
    """Every regular file under the host's /etc, by path: its mode, owner and content hash."""
    import hashlib

    digest = {}
    for path in sorted(Path("/etc").rglob("*")):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            try:
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            except PermissionError:
                content = "unreadable"
            digest[str(path)] = f"{stat.st_mode:o} {stat.st_uid}:{stat.st_gid} {content}"
    return digest


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30, every: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {result!r})")
        time.sleep(every)


# The character devices of a generation's /dev: name, major, minor.
LAB_DEVICES = (("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9), ("tty", 5, 0))


class Lab:
    """A private mount namespace with daemons in it, all stopped by PID in `close`."""

    def __init__(self, root: Path, release: Optional[str] = None):
        """With a Slurm `release`, commands run in its generation's root filesystem (`fs`) unless told `host=True`."""
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.daemons: list[tuple[str, subprocess.Popen]] = []
        self.release = release
        self.fs: Optional[Path] = None
        tree = rootfs(release) if release else None
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep", "infinity"])
        self.users: dict[str, tuple[int, int]] = {}
        try:
            wait_for(
                lambda: os.readlink(f"/proc/{self.holder.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"), "the lab's mount namespace", 10, 0.02
            )
            # A /run of its own: the daemons' sockets and PID files (munge, mysqld, nslcd, sssd) where their clients look.
            self.run("mount", "-t", "tmpfs", "-o", "mode=0755", "lab-run", "/run", host=True)
            if tree:
                self._root_filesystem(tree)
            self._etc()
        except BaseException:
            self.close()
            raise

    def _root_filesystem(self, tree: Path) -> None:
        """The generation's tree, writable through an overlay whose changes stay in the test's directory."""
        self.tree = tree
        fs, upper, work = (self.dir(name) for name in ("fs", "fs-upper", "fs-work"))
        self.run("mount", "-t", "overlay", "lab-fs", "-o", f"lowerdir={tree},upperdir={upper},workdir={work}", str(fs), host=True)
        for shared in ("proc", "sys"):
            self.run("mount", "--rbind", f"/{shared}", f"{fs}/{shared}", host=True)
        self.run("mount", "-t", "tmpfs", "-o", "mode=0755", "lab-run", f"{fs}/run", host=True)
        # A /dev of its own: the usual character devices, and room for the fake GPUs a gres.conf names (`nvidia_devices`).
        self.run("mount", "-t", "tmpfs", "-o", "mode=0755", "lab-dev", f"{fs}/dev", host=True)
        devices = " && ".join(f"mknod -m 0666 {fs}/dev/{name} c {major} {minor}" for name, major, minor in LAB_DEVICES)
        self.run("sh", "-c", f"{devices} && mkdir -m 1777 {fs}/dev/shm && ln -s /proc/self/fd {fs}/dev/fd", host=True)
        self.run("mkdir", "-p", f"{fs}{self.root}", host=True)
        self.run("mount", "--bind", str(self.root), f"{fs}{self.root}", host=True)
        self.fs = fs

    # --- the namespace ------------------------------------------------------

    def enter(self, *command: str, user: Optional[str] = None, host: bool = False) -> list[str]:
        """`command` in the lab: in its generation's root filesystem, or, with `host`, on the host's."""
        nsenter = ["nsenter", f"--target={self.holder.pid}", "--mount"]
        if self.fs and not host:
            spec = [] if user is None else ["--userspec={}:{}".format(*self.ids(user))]
            return [*nsenter, "--", "chroot", *spec, str(self.fs), *command]
        if user is None:
            return [*nsenter, "--", *command]
        uid, gid = self.ids(user, host)
        return [*nsenter, f"--setuid={uid}", f"--setgid={gid}", "--", *command]

    def ids(self, user: str, host: bool = False) -> tuple[int, int]:
        """A user's uid and gid where the lab runs its commands (the generation's accounts or the host's)."""
        if user in self.users:
            return self.users[user]
        return _account(user, Path("/") if host or not self.fs else self.tree)

    def chown(self, path: Path, user: str, host: bool = False) -> None:
        os.chown(path, *self.ids(user, host))

    def run(
        self, *command: str, user: Optional[str] = None, host: bool = False, check: bool = True, timeout: float = 60, **kwargs: Any
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(self.enter(*command, user=user, host=host), capture_output=True, text=True, timeout=timeout, **kwargs)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    def bind(self, source: Path, target: str) -> None:
        """`source` (a file or directory of the test's) appears at `target` inside the lab only: on the
        host's tree and in the generation's."""
        for top in ("", *([str(self.fs)] if self.fs else [])):
            if target.startswith("/run/"):  # the lab's own tmpfs
                self.run("mkdir", "-p", top + target, host=True)
            elif top and not target.startswith(str(self.root)):
                self.run("sh", "-c", 'test -e "$1" || { mkdir -p "$(dirname "$1")" && touch "$1"; }', "-", top + target, host=True)
            self.run("mount", "--bind", str(source), top + target, host=True)

    def dir(self, name: str, owner: Optional[str] = None, mode: int = 0o755, host: bool = False) -> Path:
        """A directory of the test's, owned by `owner` of the lab's generation (or, with `host`, of the host)."""
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(mode)
        if owner:
            self.chown(path, owner, host)
        return path

    def _etc(self) -> None:
        """The lab's account databases and hosts file: copies of the host's (and of the generation's), bound over the originals."""
        etc = self.dir("etc")
        shutil.copy("/etc/hosts", etc / "hosts")
        for name in ("passwd", "group"):
            shutil.copy(f"/etc/{name}", etc / name)
            self.run("mount", "--bind", str(etc / name), f"/etc/{name}", host=True)
            if self.fs:
                shutil.copy(self.tree / "etc" / name, etc / f"fs-{name}")
                self.run("mount", "--bind", str(etc / f"fs-{name}"), f"{self.fs}/etc/{name}", host=True)
        self.bind(etc / "hosts", "/etc/hosts")

    def add_user(self, name: str, uid: int, gid: int, groups: Iterable[str] = ()) -> None:
        """A Unix user of the lab only (its /etc/passwd and /etc/group), gone with the namespace."""
        etc = self.root / "etc"
        for prefix in ("", *(["fs-"] if self.fs else [])):
            with open(etc / f"{prefix}passwd", "a") as passwd:
                passwd.write(f"{name}:x:{uid}:{gid}:{name}:/tmp:/bin/sh\n")
            with open(etc / f"{prefix}group", "a") as group:
                group.write(f"{name}:x:{gid}:\n")
        self.users[name] = (uid, gid)

    def add_hosts(self, names: Iterable[str]) -> None:
        with open(self.root / "etc" / "hosts", "a") as hosts:
            for name in names:
                hosts.write(f"127.0.0.1\t{name}\n")

    # --- daemons ------------------------------------------------------------

    def start(self, name: str, *command: str, user: Optional[str] = None, host: bool = False) -> subprocess.Popen:
        """A daemon in the foreground, its output in logs/<name>.log."""
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child, closed here after the fork
        process = subprocess.Popen(self.enter(*command, user=user, host=host), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.daemons.append((name, process))
        return process

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def alive(self, process: subprocess.Popen) -> bool:
        return process.poll() is None

    def stop(self, name: str) -> None:
        for entry in [d for d in self.daemons if d[0] == name]:
            _terminate(entry[1].pid, entry[1])
            self.daemons.remove(entry)

    def close(self) -> None:
        for _, process in reversed(self.daemons):
            _terminate(process.pid, process)
        self.daemons.clear()
        _terminate(self.holder.pid, self.holder)


def _account(name: str, tree: Path) -> tuple[int, int]:
    """`name`'s uid and gid in the /etc/passwd of the tree rooted at `tree`."""
    for line in (tree / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return int(fields[2]), int(fields[3])
    raise KeyError(f"no user {name} in {tree}/etc/passwd")


def _terminate(pid: int, process: Optional[subprocess.Popen] = None) -> None:
    """SIGTERM, then SIGKILL after 10 s: by PID only."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                return
        elif not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if process is not None:
        process.wait(5)


# --- Slurm -----------------------------------------------------------------------

SLURMDBD_DB_PASSWORD = "lab-slurmdbd"
# auth/slurm's shared key in the labs (Slinky's clusters): never a real cluster's.
SLURM_KEY = "s" * 1024


class SlurmLab(Lab):
    """munged, MariaDB, slurmdbd, slurmctld and one `slurmd -N` per fake node, on loopback: Slurm and
    munge of the generation of Slurm `release`, MariaDB the host's."""

    def __init__(self, root: Path, cluster: str, release: str):
        super().__init__(root, release)
        self.cluster = cluster
        self.slurm_etc = self.dir("etc-slurm")
        self.bind(self.slurm_etc, "/etc/slurm")
        self.ctld_port = free_port()
        self.dbd_port = free_port()
        # One port per fake node for the lab's life: a re-rendered slurm.conf (reconfigure) keeps them.
        self.node_ports: dict[str, int] = {}

    def munged(self, key: bytes, key_path: Optional[str] = None) -> None:
        """munged with `key` (at `key_path` inside the lab when given: the layout a pod mounts)."""
        state = self.dir("munge", "munge", 0o700)
        run = self.dir("run-munge", "munge")
        self.bind(run, "/run/munge")
        key_file = state / "munge.key"
        key_file.write_bytes(key)
        key_file.chmod(0o400)
        self.chown(key_file, "munge")
        if key_path:
            self.bind(state, str(Path(key_path).parent))
        path = key_path or str(key_file)
        self.start(
            "munged", "munged", "--foreground", f"--key-file={path}", f"--pid-file={run}/munged.pid", f"--seed-file={state}/seed", user="munge"
        )
        wait_for(lambda: (run / "munge.socket.2").exists() or not self.alive(self.daemons[-1][1]), "munged's socket", 15)
        assert (run / "munge.socket.2").exists(), self.log("munged")

    def mariadb(self) -> None:
        data = self.dir("mysql", "mysql", 0o700, host=True)
        run = self.dir("run-mysqld", "mysql", host=True)
        self.bind(run, "/run/mysqld")
        self.run(
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={data}",
            "--user=mysql",
            "--skip-test-db",
            "--auth-root-authentication-method=socket",
            host=True,
            timeout=120,
        )
        self.start(
            "mariadb",
            "mariadbd",
            "--no-defaults",
            f"--datadir={data}",
            "--user=mysql",
            "--skip-networking",
            "--innodb-buffer-pool-size=16M",
            host=True,
        )
        wait_for(lambda: (run / "mysqld.sock").exists(), "MariaDB's socket", 60)
        # slurmdbd's account, by password: the generation's slurm user is not the host's.
        grant = f"CREATE USER slurm@localhost IDENTIFIED BY '{SLURMDBD_DB_PASSWORD}'; GRANT ALL ON `slurm_acct_db%`.* TO slurm@localhost"
        self.run("mariadb", "--no-defaults", f"--socket={run}/mysqld.sock", "-e", grant, host=True)

    def slurmdbd(self, user: str = "root", name: str = "", auth: str = "auth/munge", extra: Iterable[str] = ()) -> int:
        """slurmdbd as `user`, its port returned: the lab's (on `dbd_port`), or, given a `name`, one more of
        its own (its own database); `extra`: the operator's lines of slurmdbd.conf (PrivateData). slurmctld from 23.11 on takes slurmdbd's updates (new associations) only
        from root or its own SlurmUser, and slurmdbd registers only a slurmctld of root or its SlurmUser:
        so each cluster's slurmdbd runs as that cluster's SlurmUser, as a deployment has them."""
        etc = self.dir(f"etc-slurmdbd-{name}") if name else self.slurm_etc
        port = free_port() if name else self.dbd_port
        conf = etc / "slurmdbd.conf"
        conf.write_text(
            "\n".join(
                [
                    f"AuthType={auth}",
                    "DbdHost=localhost",
                    f"DbdPort={port}",
                    f"SlurmUser={user}",
                    "StorageType=accounting_storage/mysql",
                    "StorageHost=localhost",
                    "StorageUser=slurm",
                    f"StoragePass={SLURMDBD_DB_PASSWORD}",
                    f"StorageLoc=slurm_acct_db{'_' + name if name else ''}",
                    f"PidFile={self.dir(f'slurmdbd-{name}' if name else 'slurmdbd', user)}/slurmdbd.pid",
                    *extra,
                ]
            )
            + "\n"
        )
        conf.chmod(0o600)
        self.chown(conf, user)
        log = f"slurmdbd-{name}" if name else "slurmdbd"
        # slurmdbd reads the slurmdbd.conf beside $SLURM_CONF.
        self.start(log, "env", f"SLURM_CONF={etc}/slurm.conf", "slurmdbd", "-D")
        wait_for(lambda: "slurmdbd version" in self.log(log) and "started" in self.log(log), log, 60)
        return port

    def sacctmgr(self, *args: str) -> str:
        return self.run("sacctmgr", "-nP", *args).stdout

    def node_port(self, node: str) -> int:
        return self.node_ports.setdefault(node, free_port())

    def slurm_key(self, etc: Optional[Path] = None) -> None:
        """auth/slurm's key where a cluster's daemons read it: beside its slurm.conf (the lab's: and slurmdbd.conf)."""
        key = (etc or self.slurm_etc) / "slurm.key"
        key.write_text(SLURM_KEY)
        key.chmod(0o600)

    def sackd(self, etc: Path) -> None:
        """sackd (once) on the lab's key and the slurm.conf in `etc`: auth/slurm's clients (sacctmgr, sbatch, squeue)
        get their credentials from it, for every cluster of the lab, since all use the key."""
        from components.slurm.common import SACK_SOCKET

        if any(name == "sackd" for name, _ in self.daemons):
            return
        # sackd stays in the foreground (a child the lab stops by PID) only as systemd's: the lab holds the
        # datagram socket its notifications go to.
        self.sackd_notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sackd_notify.bind(str(self.root / "sackd-notify"))
        notify = f"NOTIFY_SOCKET={self.root / 'sackd-notify'}"
        self.start("sackd", "env", notify, f"SLURM_CONF={etc}/slurm.conf", "sackd", "--systemd")
        wait_for(lambda: self.run("test", "-S", SACK_SOCKET, check=False).returncode == 0, "sackd's socket", 15)

    def slurmctld(self, slurm_conf: str, gres_conf: str = "", extra: Iterable[tuple[str, str]] = (), name: str = "") -> subprocess.Popen:
        """slurmctld on these files: in the lab's /etc/slurm, or, given a `name`, in a directory of
        their own (one more cluster on the same slurmdbd; `scontrol(name, ...)` talks to it)."""
        etc = self.dir(f"etc-slurm-{name}") if name else self.slurm_etc
        (etc / "slurm.conf").write_text(slurm_conf)
        (etc / "gres.conf").write_text(gres_conf)
        for file_name, text in extra:
            (etc / file_name).write_text(text)
        if "\nAuthType=auth/slurm\n" in slurm_conf:
            self.slurm_key(etc)
            self.sackd(etc)
        process = self.start(f"slurmctld{'-' + name if name else ''}", "env", f"SLURM_CONF={etc}/slurm.conf", "slurmctld", "-D", "-i")
        wait_for(lambda: self.scontrol(name, "ping", check=False).returncode == 0 or not self.alive(process), f"slurmctld {name}", 30)
        return process

    def scontrol(self, name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        etc = self.root / f"etc-slurm-{name}" if name else self.slurm_etc
        return self.run("env", f"SLURM_CONF={etc}/slurm.conf", "scontrol", *args, check=check)

    def slurmd(self, node: str, name: str = "", conf: Optional[str] = None) -> None:
        """`slurmd -N node`, of the lab's cluster or, given a `name`, of `slurmctld(..., name=name)`'s;
        given a `conf`, a dynamic node (`slurmd -Z --conf conf`)."""
        etc = self.root / f"etc-slurm-{name}" if name else self.slurm_etc
        dynamic = ["-Z", "--conf", conf] if conf is not None else []
        self.start(f"slurmd-{node}", "env", f"SLURM_CONF={etc}/slurm.conf", "slurmd", "-D", "-N", node, *dynamic)

    def remove_cgroups(self, node: str) -> None:
        """The cgroup v1 directories `slurmd -N node` made (`slurm_<node>` under each controller of the host's
        /sys/fs/cgroup), empty once its jobs have ended and it has stopped: removed, deepest first."""
        for top in Path("/sys/fs/cgroup").glob(f"*/slurm_{node}"):
            for directory in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                directory.rmdir()
            top.rmdir()

    def squeue(self, job: str, fields: str = "%T %r") -> str:
        return self.run("squeue", "-h", "-j", job, "-o", fields).stdout.strip()

    def sbatch(self, user: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *args, user=user, check=check)


# How Slurm's daemons complain about their configuration: these words, or any `error:` line ...
CONFIG_COMPLAINTS = re.compile(r"fatal|specified more than once|Parsing error|unrecognized|[Ii]nvalid|defunct|deprecated|error:")
# ... but those about this machine or a first start, not the configuration: no MailProg, no state saved yet,
# the tenants' accounts before the tenants Job made them, the lab's state directory or PMIx; no GPU for
# AutoDetect=nvidia to find (a GPU host's part, README); cgroup v1, the only one this machine mounts, which
# the lab's configs choose (slurm.worker.cgroupVersion: v1) and 26.05 calls deprecated.
NOT_ABOUT_CONFIG = re.compile(
    r"Configured MailProg is invalid"
    r"|error: System GPU detection failed"
    r"|cgroup/v1 plugin is deprecated"
    r"|Could not open (node|job|reservation|trigger|resv|assoc_usage|qos_usage|fed_mgr|last_tres) state file"
    r"|Trying backup state save file|No fed_mgr state file"
    r"|accounts_list_build: No association for account"
    r"|mpi/pmix|MPI: Cannot create context"
)


def config_complaints(log: str) -> list[str]:
    """The lines of a Slurm daemon's log that fault its configuration."""
    return [line for line in log.splitlines() if CONFIG_COMPLAINTS.search(line) and not NOT_ABOUT_CONFIG.search(line)]


# The lab's process tracking and task plugins where the operator's text names none: no cgroups.
LAB_TASKS = ("ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none")


def lab_base(
    cluster: str,
    lab: SlurmLab,
    nodes: Mapping[str, tuple[str, int]],
    lines: Iterable[str],
    name: str = "",
    then: str = "",
    auth: str = "auth/munge",
    slurm_defaults: Iterable[str] = (),
    shape: Optional[tuple[int, int]] = None,
) -> str:
    """The part of slurm.conf an operator generates itself (soperator, Slinky), as a minimal
    base for this machine: the controller on loopback, accounting, one fake node per entry
    (`nodes`: name -> (feature, GPUs)) with its own port, `%n` in every per-node path;
    `lines` are that operator's own settings, and `then`, the rendered text, follows them
    (what either sets of `LAB_TASKS` replaces the lab's line). `auth`: the cluster's AuthType (auth/slurm: with
    CredType=cred/slurm, its key written by `SlurmLab.slurmctld`). `slurm_defaults`: keys of the lab's lines the
    operator leaves to Slurm's defaults, left out. `shape`: every node's CPUs and MiB (`lab_node_shape`).
    A `name` gives the slurmctld of `SlurmLab.slurmctld(..., name=name)` its own state and port."""
    lines = list(lines)
    operators = confinement.settings("\n".join([*lines, then]))
    state = lab.dir(f"state-{name}" if name else "state", "root")
    base = [
        f"ClusterName={cluster}",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={free_port() if name else lab.ctld_port}",
        f"AuthType={auth}",
        *(["CredType=cred/slurm"] if auth == "auth/slurm" else []),
        "SlurmUser=root",
        f"StateSaveLocation={state}",
        f"SlurmdSpoolDir={state}/slurmd-%n",
        *lab_site_lines(lab, state),
        *(line for line in LAB_TASKS if line.partition("=")[0].lower() not in operators),
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=127.0.0.1",
        f"AccountingStoragePort={lab.dbd_port}",
        *lines,
    ]
    for name, (feature, gpus) in nodes.items():
        base.append(f"NodeName={name} NodeAddr=127.0.0.1 {lab_node_shape(lab, name, gpus, shape)} Gres=gpu:{gpus} Feature={feature} State=UNKNOWN")
    left_out = {key.lower() for key in slurm_defaults}
    return "\n".join(line for line in base if line.partition("=")[0].lower() not in left_out) + "\n" + then


# NVIDIA's character device major: /dev/nvidia<N> is c 195 N.
NVIDIA_MAJOR = 195


def gpu_device_nodes(lab: Lab, nodes: Mapping[str, tuple[str, int]], types: Optional[Mapping[str, Optional[str]]] = None) -> str:
    """gres.conf for nodes whose fake GPUs are real character devices, /dev/nvidia<N>'s numbers
    (mknod c 195 N, readable and writable by all) with no driver behind them. Opening one tells
    the devices cgroup's refusal (EPERM) from an allowed open that finds no driver (ENXIO). `types`: a node's
    GPU type, where it has one."""
    devices = lab.dir("gpu-device-nodes")
    lines, minor = [], 0
    for name, (_, gpus) in nodes.items():
        for _ in range(gpus):
            device = devices / f"{name}-nvidia{minor}"
            if not device.exists():
                os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))
                device.chmod(0o666)
            gpu_type = (types or {}).get(name)
            lines.append(f"NodeName={name} Name=gpu{f' Type={gpu_type}' if gpu_type else ''} File={device}\n")
            minor += 1
    return "".join(lines)


def nvidia_devices(lab: Lab, count: int) -> None:
    """/dev/nvidia0 to /dev/nvidia<count-1> in the lab's generation (c 195 N, no driver behind them): the
    device nodes a gres.conf's `File=/dev/nvidia[...]` names, as a GPU node has them."""
    assert lab.fs
    made = (f"test -e {lab.fs}/dev/nvidia{n} || mknod -m 0666 {lab.fs}/dev/nvidia{n} c {NVIDIA_MAJOR} {n}" for n in range(count))
    lab.run("sh", "-c", " && ".join(made), host=True)


def run_pod_script(
    lab: Lab,
    name: str,
    files: Mapping[str, str],
    hosts: Iterable[str],
    key: Optional[bytes] = None,
    script: Optional[str] = None,
    timeout: float = 120,
    sidecar: Optional[str] = None,
) -> subprocess.CompletedProcess:
    """A pod's script (the ConfigMap's `script`, the tenants Job's by default) the way its container sees the world,
    on this machine: a private mount namespace in the lab's generation's root filesystem (the image's Slurm) with the lab's /etc, /run;
    the ConfigMap's `files` at /tenants, the auth key (if any) at /auth-key/key, and its own writable
    /etc/slurm, /etc/munge and an /etc/hosts naming `hosts` 127.0.0.1 (the Services). In a PID namespace of
    its own, as a container: the daemons the script starts (munged, sackd) end with it. A `sidecar` script (a file
    in `files`) runs beside it from the start, with an /etc/slurm of its own, as its container's own filesystem."""
    from components.slurm.client import SCRIPT_DIR
    from components.slurm.common import KEY_DIR
    from components.tenancy import SCRIPT

    assert lab.fs, "a pod runs in a generation's root filesystem"
    base = lab.dir(f"pod-{name}")
    config = lab.dir(f"pod-{name}/configmap")
    for file_name, text in files.items():
        (config / file_name).write_text(text)
    hosts_file = base / "hosts"
    hosts_file.write_text((lab.root / "etc" / "hosts").read_text() + "".join(f"127.0.0.1\t{host}\n" for host in hosts))
    binds = {SCRIPT_DIR: config, "/etc/slurm": lab.dir(f"pod-{name}/etc-slurm"), "/etc/munge": lab.dir(f"pod-{name}/etc-munge")}
    if key is not None:
        key_dir = lab.dir(f"pod-{name}/auth-key")
        (key_dir / "key").write_bytes(key)
        (key_dir / "key").chmod(0o400)
        binds[KEY_DIR] = key_dir
        # A script that starts its own munged or sackd gets its own socket directories.
        binds["/run/munge"] = lab.dir(f"pod-{name}/run-munge")
        binds["/run/slurm"] = lab.dir(f"pod-{name}/run-slurm")
    mounts = [f"mkdir -p {lab.fs}{target} && mount --bind {source} {lab.fs}{target}" for target, source in binds.items()]
    mounts.append(f"mount --bind {hosts_file} {lab.fs}/etc/hosts")
    if sidecar:
        own_etc = (
            f"mount --bind {lab.dir(f'pod-{name}/sidecar-etc-slurm')} {lab.fs}/etc/slurm && exec chroot {lab.fs} /bin/bash {SCRIPT_DIR}/{sidecar}"
        )
        mounts.append(f"{{ unshare --mount --propagation private sh -c {shlex.quote(own_etc)} & }}")
    command = " && ".join(mounts) + f" && exec chroot {lab.fs} /bin/bash {SCRIPT_DIR}/{script or SCRIPT}"
    return lab.run("unshare", "--mount", "--pid", "--fork", "--propagation", "private", "sh", "-c", command, host=True, check=False, timeout=timeout)


def lab_node_shape(lab: SlurmLab, node: str, gpus: int, shape: Optional[tuple[int, int]] = None) -> str:
    """What a fake node has on this machine: its own port on loopback (the lab's for life: a re-rendered
    slurm.conf keeps it) and `shape`'s CPUs and MiB (a worker pod's), else two CPUs per fake GPU and 500 MB
    (slurmd reports these, SlurmdParameters=config_overrides)."""
    cpus, memory = shape or (2 * max(gpus, 1), 500)
    return f"Port={lab.node_port(node)} CPUs={cpus} RealMemory={memory}"


# The lab's site lines, in lab_base and after an operator's whole slurm.conf (ACK's): each slurmd's PID and
# log file of its own (`%n`), slurmd's counts as configured (the node lines', whatever this machine has), a
# scheduler pass every second, and a requeued job free to run again after 10 s, not 121.
def lab_site_lines(lab: SlurmLab, state: Path) -> list[str]:
    return [
        f"SlurmdPidFile={state}/slurmd-%n.pid",
        f"SlurmdLogFile={lab.logs}/slurmd-%n.file",
        f"SlurmctldPidFile={state}/slurmctld.pid",
        "SlurmdParameters=config_overrides",
        "SchedulerParameters=sched_interval=1,bf_interval=1",
        "AuthInfo=cred_expire=10",
    ]


@dataclasses.dataclass
class ClusterFiles:
    """What one operator's cluster reads in the lab: slurm.conf, the files beside it, gres.conf (the
    rendered lines, then the fake GPUs), each dynamic node's `slurmd -Z --conf` (static nodes are in slurm.conf),
    and the lines the operator writes into slurmdbd.conf from what we render (the lab's slurmdbd takes them)."""

    slurm_conf: str
    beside: list[tuple[str, str]]
    gres_conf: str
    dynamic: dict[str, str]
    slurm_user: str = "root"
    auth: str = "auth/munge"
    slurmdbd_lines: list[str] = dataclasses.field(default_factory=list)  # what the operator adds to slurmdbd.conf


def fake_gpu_lines(config: Any, lab: SlurmLab, nodes: Mapping[str, tuple[str, int]]) -> str:
    """gres.conf lines for the nodes' fake GPUs, each of its pool's Slurm GPU type: the lines AutoDetect makes on a GPU node."""
    pools = {pool.name: pool for pool in config.gpu_pools}
    return gpu_device_nodes(lab, nodes, {node: pools[pool].slurm_gpu_type for node, (pool, _) in nodes.items()})


def soperator4_files(config: Any, lab: SlurmLab, nodes: Mapping[str, tuple[str, int]]) -> ClusterFiles:
    """The operator's own lines (its preempt settings, a `NodeSet=<name> Nodes=...` per NodeSet, structured
    partitions; each node with its NodeSet's `nodeConfig.features`), then `include custom_slurm.conf`
    holding customSlurmConfig verbatim, as soperator 4.1.7 writes them."""
    from components.slurm import manifest_of, operator_module
    from components.slurm.common import worker_shape

    spec = manifest_of(operator_module(config).render(config), "SlurmCluster")[0]["spec"]
    partitions = [f"PartitionName={p['name']} Nodes={','.join(p['nodeSetRefs'])} {p['config']}" for p in spec["partitionConfiguration"]["partitions"]]
    pools = sorted({pool for pool, _ in nodes.values()})
    own = [
        "GresTypes=gpu",
        # Its scheduling lines, in place of the lab's: memory is consumable.
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory,CR_CORE_DEFAULT_DIST_BLOCK",
        "PreemptMode=REQUEUE",
        "PreemptType=preempt/partition_prio",
        *(f"NodeSet={p} Nodes={','.join(n for n, (pool, _) in nodes.items() if pool == p)}" for p in pools),
        *partitions,
        # slurmConfig's fields (ours: the job-mapping Prolog and Epilog), at the lab's copy of the workers' mount.
        *for_this_machine(
            "\n".join(f"{key.capitalize()}={value}" for key, value in spec.get("slurmConfig", {}).items()), paths=gpu_job_scripts(lab)
        ).splitlines(),
        "include custom_slurm.conf",
    ]
    custom = "# CUSTOM SLURM CONFIG\n" + spec["customSlurmConfig"] + "\n"
    # Untyped: soperator's NodeSets give no GPU type.
    base = lab_base(config.cluster.name, lab, nodes, own, slurm_defaults=("SelectType", "SelectTypeParameters"), shape=worker_shape(config))
    # slurmNodes.accounting.slurmdbdConfig: the operator writes privateData as slurmdbd.conf's PrivateData.
    dbd = spec["slurmNodes"]["accounting"].get("slurmdbdConfig", {})
    dbd_lines = [f"PrivateData={dbd['privateData']}"] if dbd.get("privateData") else []
    return ClusterFiles(base, [("custom_slurm.conf", for_this_machine(custom))], gpu_device_nodes(lab, nodes), {}, slurmdbd_lines=dbd_lines)


def slinky_slurm_conf(config: Any, lab: SlurmLab, name: str = "") -> str:
    """Slinky 1.2.1's own lines (MaxNodeCount=1024, the room its dynamic nodes need; a NodeSet per NodeSet CR
    over its Feature, no static nodes; no partition of its own: ours disable it), then the Controller's
    `extraConf` verbatim, as its controller builder writes slurm.conf."""
    from components.slurm import manifest_of, slinky

    nodesets = sorted({slinky.nodeset_name(pool) for pool in config.gpu_pools})
    own = ["MaxNodeCount=1024", *(f"NodeSet={feature} Feature={feature}" for feature in nodesets), f"SlurmdPort={free_port()}"]
    # Prolog=<key> and Epilog=<key> for each key of the ConfigMaps its Controller references, which it mounts beside
    # slurm.conf: here the lab's copy of the job-mapping scripts.
    (scripts,) = gpu_job_scripts(lab).values()
    spec, maps = slinky.controller(config)["spec"], {m["metadata"]["name"]: m for m in manifest_of(slinky.render(config), "ConfigMap")}
    refs = (("Prolog", "prologScriptRefs"), ("Epilog", "epilogScriptRefs"))
    own += [f"{kind}={scripts}/{key}" for kind, field in refs for ref in spec.get(field, []) for key in maps[ref["name"]]["data"]]
    extra = for_this_machine(slinky.controller(config)["spec"]["extraConf"] + "\n")
    cluster = f"{config.cluster.name}-{name}" if name else config.cluster.name
    # Its controller writes no SelectType or SelectTypeParameters: Slurm's defaults (cons_tres; memory consumable from 23.11).
    defaults = ("SelectType", "SelectTypeParameters")
    return lab_base(cluster, lab, {}, own, name, then=extra, auth=slinky.accounting_client(config).auth, slurm_defaults=defaults)


def slinky_files(config: Any, lab: SlurmLab, nodes: Mapping[str, tuple[str, int]]) -> ClusterFiles:
    """Slinky's slurm.conf and files; each node a dynamic node of its pool's NodeSet, as the operator starts it
    (`slurmd -Z --conf "<NodeSet extraConf> Feature=<nodeset>"`), with a worker pod's CPUs and memory."""
    from components.slurm import slinky
    from components.slurm.common import worker_shape

    pools = {pool.name: pool for pool in config.gpu_pools}
    files = slinky.config_files(config)["data"]
    dynamic = {
        node: f"{slinky.nodeset(config, pools[pool])['spec']['extraConf']} Feature={slinky.nodeset_name(pools[pool])} {lab_node_shape(lab, node, gpus, worker_shape(config))}"
        for node, (pool, gpus) in nodes.items()
    }
    gres = files["gres.conf"] + fake_gpu_lines(config, lab, nodes)
    auth = slinky.accounting_client(config).auth
    # The Accounting's extraConf, which the operator appends to slurmdbd.conf.
    dbd_lines = [line for line in slinky.accounting(config)["spec"].get("extraConf", "").splitlines() if line]
    return ClusterFiles(
        slinky_slurm_conf(config, lab), [("cgroup.conf", for_this_machine(files["cgroup.conf"]))], gres, dynamic, auth=auth, slurmdbd_lines=dbd_lines
    )


def gpu_job_scripts(lab: SlurmLab) -> dict[str, Path]:
    """The job-mapping Prolog and Epilog where a worker mounts them (components/slurm/gpu_jobs.py), as a `paths`
    entry: the rendered script in a directory of the test's, writing the mapping into another."""
    from components.slurm import gpu_jobs

    scripts = lab.dir("gpu-job-scripts")
    for name in (gpu_jobs.PROLOG, gpu_jobs.EPILOG):
        (scripts / name).write_text(gpu_jobs.script(str(lab.dir("gpu-job-mapping"))))
        (scripts / name).chmod(0o755)
    return {gpu_jobs.SCRIPTS_DIR: scripts}


def ack_files(config: Any, lab: SlurmLab, nodes: Mapping[str, tuple[str, int]]) -> ClusterFiles:
    """ACK's generated slurm.conf verbatim but for site lines, then the lab's (`lab_site_lines`); each node a
    dynamic node of its worker group (`NodeSet=<group> Feature=<group>`), its GPUs those of the group, its
    CPUs and memory a worker pod's (its memory is consumable: SelectTypeParameters=CR_Core_Memory)."""
    from components.slurm import ack
    from components.slurm.common import gres_gpus, worker_shape

    pools = {pool.name: pool for pool in config.gpu_pools}
    state = lab.dir("state", "slurm")
    hosts = [ack.slurmctld_host(config), ack.slurmdbd_host(config)]
    paths = {"/var/spool/slurmctld": state, "/var/spool/slurmd": state / "slurmd-%n", **gpu_job_scripts(lab)}
    ports = {"SlurmctldPort": lab.ctld_port, "AccountingStoragePort": lab.dbd_port}
    conf = for_this_machine(ack.slurm_conf(config), hosts, paths, ports) + "\n".join(lab_site_lines(lab, state)) + "\n"
    dynamic = {
        node: f"Gres={gres_gpus(pools[pool])} Feature={pool} {lab_node_shape(lab, node, gpus, worker_shape(config))}"
        for node, (pool, gpus) in nodes.items()
    }
    cgroup = ack.slurm_conf_config_map(config)["data"]["cgroup.conf"]
    gres = for_this_machine(ack.gres_conf(config)) + fake_gpu_lines(config, lab, nodes)
    return ClusterFiles(conf, [("cgroup.conf", cgroup)], gres, dynamic, slurm_user="slurm")


# Each operator's cluster in the lab, by the name tests give it (operator_of in tests/test_services_slurm.py).
CLUSTER_FILES: dict[str, Callable[[Any, SlurmLab, Mapping[str, tuple[str, int]]], ClusterFiles]] = {
    "soperator 4.1.7": soperator4_files,
    "slinky": slinky_files,
    "ack": ack_files,
}


def as_operator(document: dict[str, Any], operator: str, release: str) -> dict[str, Any]:
    """A stack's config document (soperator 4.1.7's) deployed by `operator` instead, for images of Slurm
    `release`; Slinky's and ACK's workers confine jobs by cgroup v1, as this machine mounts them."""
    document = copy.deepcopy(document)
    if operator == "soperator 4.1.7":
        return document
    slurm = document["slurm"]
    slurm["worker"] = {**slurm.get("worker", {}), "cgroupVersion": "v1"}
    document["slurmOperator"] = operator
    without_keys_unread_by(operator, document)
    if operator == "ack":
        # staging-hangzhou's ACK settings, its image of `release`, workers as dynamic nodes (no autoscaling).
        hangzhou = stack_config("staging-hangzhou")["slurm"]
        slurm["accounting"] = hangzhou["accounting"]
        ack = {key: value for key, value in hangzhou["ack"].items() if key != "home"}
        slurm["ack"] = {**ack, "slurmRelease": release, "autoscaling": {"enabled": False}}
    return document


class OperatorLab(SlurmLab):
    """A lab running one stack's slurm.conf as `operator` renders it: its config and its slurmctld."""

    config: Any
    ctld: subprocess.Popen
    etc_before: dict[str, str]

    def __init__(self, root: Path, cluster: str, release: str, operator: str):
        super().__init__(root, cluster, release)
        self.operator = operator

    def files(self, config: Any, nodes: Mapping[str, tuple[str, int]]) -> ClusterFiles:
        return CLUSTER_FILES[self.operator](config, self, nodes)

    def reconfigure(self, config: Any, nodes: Mapping[str, tuple[str, int]]) -> None:
        """slurmctld and the slurmds re-read the layout `config` renders, as after a `pulumi up` changes it."""
        files = self.files(config, nodes)
        for file_name, text in [("slurm.conf", files.slurm_conf), ("gres.conf", files.gres_conf), *files.beside]:
            (self.slurm_etc / file_name).write_text(text)
        self.run("scontrol", "reconfigure")


@contextlib.contextmanager
def operator_lab(
    operator: str, config: Any, nodes: Mapping[str, tuple[str, int]], users: Iterable[str], release: str, slurmd: bool = True
) -> Iterator[OperatorLab]:
    """munged, MariaDB, slurmdbd, slurmctld on `config`'s slurm.conf as `operator` renders it and a slurmd per
    fake node (`nodes`: name -> (pool, GPUs)), all idle, of Slurm `release`'s generation; `users` exist in the
    lab. Without `slurmd`, one slurmd answers slurmctld for every node (`one_slurmd`): room for reservations
    at a size no machine runs a slurmd per node for. The host's /etc is checked unchanged after."""
    require_packages()
    etc_before = etc_digest()
    # Not under pytest's 0700 temporary directory: munged (user munge) checks every parent of its files.
    root = Path(tempfile.mkdtemp(prefix="slurm-platform-services-"))
    root.chmod(0o755)
    lab = OperatorLab(root, config.cluster.name, release, operator)
    try:
        # The Unix users exist before their associations reach slurmctld.
        for number, user in enumerate(users):
            lab.add_user(user, 10000 + number, 10000 + number)
        lab.munged(b"m" * 1024)
        lab.mariadb()
        if not slurmd:
            # One port for every node: the one slurmd there answers slurmctld for all of them.
            lab.node_ports.update(dict.fromkeys(nodes, free_port()))
        files = lab.files(config, nodes) if slurmd else one_slurmd(lab.files(config, nodes))
        if files.auth == "auth/slurm":
            lab.slurm_key()
        lab.slurmdbd(files.slurm_user, auth=files.auth, extra=files.slurmdbd_lines)
        lab.ctld = lab.slurmctld(files.slurm_conf, files.gres_conf, files.beside)
        if slurmd:
            start_slurmds(lab, files, nodes)
        else:
            lab.slurmd(next(iter(nodes)))
        lab.config = config
        lab.etc_before = etc_before
        yield lab
    finally:
        lab.close()
        for node in nodes:
            lab.remove_cgroups(node)
        shutil.rmtree(root)
    # Users, hosts, Slurm and munge config all lived in the lab's namespace: the host's /etc is as it was.
    assert etc_digest() == etc_before


def one_slurmd(files: ClusterFiles) -> ClusterFiles:
    """The cluster's static nodes IDLE from the start and never pinged (SlurmdTimeout=0), all on the port of one
    slurmd that answers slurmctld's registration request for each: slurmctld counts them available (a
    reservation takes only available nodes; a node whose slurmd does not answer, or that never registers, is not)."""
    conf = re.sub(r"^(NodeName=\S+ .*) State=UNKNOWN$", r"\1 State=IDLE", files.slurm_conf, flags=re.MULTILINE)
    return dataclasses.replace(files, slurm_conf=conf + "SlurmdTimeout=0\n")


def start_slurmds(lab: OperatorLab, files: ClusterFiles, nodes: Mapping[str, tuple[str, int]]) -> None:
    """A slurmd per fake node, waited for until every one is idle."""
    for node in nodes:
        lab.slurmd(node, conf=files.dynamic.get(node))
    try:
        wait_for(lambda: lab.run("sinfo", "-h", "-N", "-o", "%T").stdout.split() == ["idle"] * len(nodes), "every fake GPU node idle", 60)
    except AssertionError as error:
        # Once in five full runs the nodes were not all idle after 60 s: say which, and what their slurmd logged.
        states = lab.run("sinfo", "-h", "-N", "-o", "%N %T %E").stdout
        slurmd_logs = "\n".join(f"{path.name}:\n{path.read_text(errors='replace')[-1500:]}" for path in sorted(lab.logs.glob("slurmd-*")))
        raise AssertionError(f"{error}\nsinfo:\n{states}\n{slurmd_logs}\nslurmctld:\n{lab.log('slurmctld')[-3000:]}") from None


def scontrol_fields(line: str) -> dict[str, str]:
    """One line of `scontrol -o show reservation` (or `partition`), by field."""
    return dict(field.split("=", 1) for field in line.split() if "=" in field)


def tenants_job(lab: SlurmLab, config: Any, name: str, conf_edit: Callable[[str], str] = lambda text: text) -> subprocess.CompletedProcess:
    """The tenants Job's script (components/tenancy.py) as its pod runs it, against the lab's slurmdbd and slurmctld."""
    from components import tenancy
    from components.slurm import operator_module

    client = operator_module(config).accounting_client(config)
    return slurm_client_pod(lab, config, name, tenancy.config_map(config, client)["data"], conf_edit=conf_edit)


def slurm_client_pod(
    lab: SlurmLab,
    config: Any,
    name: str,
    data: dict[str, str],
    script: Optional[str] = None,
    conf_edit: Callable[[str], str] = lambda text: text,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    """A Slurm client pod's script (components/slurm/client.py) from its ConfigMap's `data`, against the lab's slurmdbd and slurmctld."""
    from components.slurm import operator_module

    client = operator_module(config).accounting_client(config)
    conf = for_this_machine(data["slurm.conf"], [client.slurmctld_host], ports={"AccountingStoragePort": lab.dbd_port})
    data = {**data, "slurm.conf": conf_edit(conf + f"SlurmctldPort={lab.ctld_port}\n")}
    key = SLURM_KEY.encode() if client.auth == "auth/slurm" else (lab.root / "munge" / "munge.key").read_bytes()
    return run_pod_script(lab, name, data, [client.slurmdbd_host], key=None if client.munge_image else key, script=script, timeout=timeout)


# --- OpenLDAP ----------------------------------------------------------------------

# Where the Debian packages keep their state; the lab binds a directory of its own over each.
SSSD_STATE = ("/var/lib/sss/db", "/var/lib/sss/pipes", "/var/lib/sss/mc", "/var/log/sssd")


class LdapLab(Lab):
    """slapd set up as the rendered StatefulSet's environment asks bitnami's image to be (LDAP_ROOT,
    LDAP_ADMIN_USERNAME, LDAP_ALLOW_ANON_BINDING, LDAP_ENABLE_TLS, LDAP_REQUIRE_TLS), listening as its
    run.sh has it: ldap:// always, ldaps:// with TLS, and ldapi in the lab's /run. Then, as the image's
    setup.sh does on first start (libopenldap.sh's ldap_initialize, then ldap_custom_init_scripts): the
    seed LDIFs loaded by the admin over ldapi, TLS made required, slapd stopped, the
    /docker-entrypoint-initdb.d scripts run as slapd's user, all verbatim; then slapd starts to serve."""

    def __init__(self, root: Path, statefulset: Mapping[str, Any], admin_password: str, tls_host: str = ""):
        """With LDAP_ENABLE_TLS, the TLS Secret (tls.crt, tls.key, ca.crt) is made here by a CA of the
        lab's own for `tls_host`, the name clients connect to. `port` is the one the clients use (ldaps with
        TLS), `ldap_port` the cleartext listener (the image's LDAP_PORT_NUMBER, behind the Service's 389)."""
        super().__init__(root)
        (container,) = statefulset["spec"]["template"]["spec"]["containers"]
        self.env = {entry["name"]: entry.get("value") for entry in container["env"]}
        self.base_dn = self.env["LDAP_ROOT"]
        self.admin_dn = f"cn={self.env['LDAP_ADMIN_USERNAME']},{self.base_dn}"
        self.admin_password = admin_password
        self.config_dir = self.dir("slapd.d", "openldap", 0o700)
        data = self.dir("ldap-data", "openldap", 0o700)
        self.run("mkdir", "-p", "/run/slapd")
        self.run("chown", "openldap:openldap", "/run/slapd")
        self.tls = self.tls_secret(tls_host) if _is_boolean_yes(self.env.get("LDAP_ENABLE_TLS")) else None
        initial = self.root / "cn-config.ldif"
        anonymous = _is_boolean_yes(self.env.get("LDAP_ALLOW_ANON_BINDING", "yes"))
        initial.write_text(_cn_config(self.base_dn, self.admin_dn, admin_password, data, anonymous, self.tls))
        self.run("slapadd", "-n", "0", "-F", str(self.config_dir), "-l", str(initial), user="openldap")
        # bitnami's ldap_add_custom_schema: each LDIF of LDAP_CUSTOM_SCHEMA_DIR (the rendered ConfigMap's) by slapadd -n 0.
        if self.env.get("LDAP_CUSTOM_SCHEMA_DIR"):
            from components.identity.schema import SCHEMA_FILE, schema_ldif

            schema = self.root / SCHEMA_FILE
            schema.write_text(schema_ldif())
            self.run("slapadd", "-n", "0", "-F", str(self.config_dir), "-l", str(schema), user="openldap")
        self.ldap_port = free_port()
        self.port = free_port() if self.tls else self.ldap_port
        self.url = f"ldaps://127.0.0.1:{self.port}" if self.tls else f"ldap://127.0.0.1:{self.port}"
        self.slapd()

    def slapd(self) -> None:
        listeners = [f"ldap://127.0.0.1:{self.ldap_port}/", *([f"ldaps://127.0.0.1:{self.port}/"] if self.tls else []), "ldapi:///"]
        self.start("slapd", "slapd", "-d", "256", "-u", "openldap", "-g", "openldap", "-F", str(self.config_dir), "-h", " ".join(listeners))
        # Ready as the StatefulSet's probe has it (a TCP connect to the LDAP port): with TLS required, slapd
        # refuses ldapi binds too, so the image's own is_ldap_ready (ldapi EXTERNAL) serves only its first start.
        wait_for(lambda: _listening(self.ldap_port) or not self.alive(self.daemons[-1][1]), "slapd", 20)
        assert _listening(self.ldap_port), self.log("slapd")[-3000:]

    def tls_secret(self, host: str) -> Path:
        """A CA and a server certificate for `host` (openssl), as cert-manager would issue them."""
        tls = self.dir("tls", "openldap")
        openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        self.run(*openssl, "-keyout", f"{tls}/ca.key", "-out", f"{tls}/ca.crt", "-subj", "/CN=slurm-platform lab CA")
        self.run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{tls}/tls.key", "-out", f"{tls}/tls.csr", "-subj", f"/CN={host}")
        (tls / "san.ext").write_text(f"subjectAltName=DNS:{host}\n")
        self.run(
            "openssl", "x509", "-req", "-in", f"{tls}/tls.csr", "-CA", f"{tls}/ca.crt", "-CAkey", f"{tls}/ca.key",
            "-CAcreateserial", "-days", "1", "-extfile", f"{tls}/san.ext", "-out", f"{tls}/tls.crt",
        )  # fmt: skip
        for name in ("tls.key", "tls.crt", "ca.crt"):
            shutil.chown(tls / name, "openldap", "openldap")
        (tls / "ca.crt").chmod(0o644)
        (tls / "tls.key").chmod(0o600)
        return tls

    def load(self, seed: str, init_scripts: Mapping[str, str]) -> None:
        """The rest of the image's first start: ldap_add_custom_ldifs, ldap_configure_tls_required,
        ldap_stop, ldap_custom_init_scripts (as slapd's user, slapd stopped), then run.sh's slapd."""
        seed_file = self.root / "seed.ldif"
        seed_file.write_text(seed)
        self.run("ldapadd", "-x", "-H", "ldapi:///", "-D", self.admin_dn, "-w", self.admin_password, "-f", str(seed_file))
        if self.tls and _is_boolean_yes(self.env.get("LDAP_REQUIRE_TLS")):
            self.run(
                "ldapmodify", "-Y", "EXTERNAL", "-H", "ldapi:///", input="dn: cn=config\nchangetype: modify\nadd: olcSecurity\nolcSecurity: tls=1\n"
            )
        self.stop("slapd")
        for name, script in sorted(init_scripts.items()):
            path = self.root / name
            path.write_text(script)
            # setup.sh exports the image's paths to them (libopenldap.sh's ldap_env).
            self.run("env", f"LDAP_ONLINE_CONF_DIR={self.config_dir}", "bash", str(path), user="openldap")
        self.slapd()

    def ldap(self, tool: str, *args: str, bind: Optional[tuple[str, str]] = None, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess:
        """An ldap-utils tool against the lab's slapd, bound as `bind` (dn, password) or anonymously."""
        credentials = ["-D", bind[0], "-w", bind[1]] if bind else []
        # The admin's tools skip the name check (127.0.0.1 is not the certificate's name); the clients under test do not.
        return self.run("env", "LDAPTLS_REQCERT=never", tool, "-x", "-H", self.url, *credentials, *args, check=check, **kwargs)

    def nsswitch(self, source: str) -> None:
        """The lab's /etc/nsswitch.conf: users and groups from files, then `source` (ldap: nslcd, sss: sssd)."""
        text = Path("/etc/nsswitch.conf").read_text()
        text = re.sub(r"(?m)^(passwd|group):.*$", rf"\1: files {source}", text)
        path = self.root / "etc" / "nsswitch.conf"
        path.write_text(text)
        self.bind(path, "/etc/nsswitch.conf")

    def nslcd(self, conf: str) -> None:
        path = self.root / "etc" / "nslcd.conf"
        path.write_text(conf)
        path.chmod(0o600)
        self.bind(path, "/etc/nslcd.conf")
        self.run("mkdir", "-p", "/run/nslcd")
        self.run("chown", "nslcd:nslcd", "/run/nslcd")  # as the package's tmpfiles.d has it
        self.nsswitch("ldap")
        process = self.start("nslcd", "nslcd", "-d")
        listening = lambda: self.run("test", "-S", "/run/nslcd/socket", check=False).returncode == 0  # noqa: E731
        wait_for(lambda: listening() or not self.alive(process), "nslcd's socket", 20)
        assert listening(), self.log("nslcd")[-3000:]

    def sssd(self, conf: str) -> subprocess.CompletedProcess:
        """sssd in the foreground on the rendered sssd.conf; returns `sssctl config-check`."""
        etc = self.dir("etc-sssd", mode=0o711)
        path = etc / "sssd.conf"
        path.write_text(conf)
        path.chmod(0o600)
        self.bind(etc, "/etc/sssd")
        for target in SSSD_STATE:
            self.bind(self.dir("sssd" + target.replace("/", "-"), "sssd", 0o770), target)
        self.run("mkdir", "-p", "/var/lib/sss/pipes/private")
        checked = self.run("sssctl", "config-check", check=False)
        self.nsswitch("sss")
        self.start("sssd", "sssd", "-i", "--logger=stderr")
        wait_for(lambda: self.run("test", "-S", "/var/lib/sss/pipes/nss", check=False).returncode == 0, "sssd's nss responder", 30)
        return checked


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _is_boolean_yes(value: Optional[str]) -> bool:
    """bitnami's is_boolean_yes (libvalidations.sh): 1, yes or true, in any case."""
    return str(value or "").lower() in ("1", "yes", "true")


def _cn_config(base_dn: str, admin_dn: str, admin_password: str, data: Path, anonymous: bool, tls: Optional[Path]) -> str:
    """slapd's cn=config as bitnami's image builds it: the mdb database is {2} (after the monitor),
    the admin is its rootDN, root over ldapi manages cn=config, pw-sha2 reads {SSHA512} hashes."""
    from components.identity.entries import ssha512

    lines = [
        "dn: cn=config",
        "objectClass: olcGlobal",
        "cn: config",
        *([] if anonymous else ["olcDisallows: bind_anon", "olcRequires: authc"]),
        *(
            [f"olcTLSCACertificateFile: {tls}/ca.crt", f"olcTLSCertificateFile: {tls}/tls.crt", f"olcTLSCertificateKeyFile: {tls}/tls.key"]
            if tls
            else []
        ),
        "",
        "dn: cn=module{0},cn=config",
        "objectClass: olcModuleList",
        "cn: module{0}",
        "olcModulePath: /usr/lib/ldap",
        "olcModuleLoad: back_mdb",
        "olcModuleLoad: pw-sha2",
        "",
        "dn: cn=schema,cn=config",
        "objectClass: olcSchemaConfig",
        "cn: schema",
        "",
        *(f"include: file:///etc/ldap/schema/{schema}.ldif" for schema in ("core", "cosine", "nis", "inetorgperson")),
        "",
        "dn: olcDatabase={-1}frontend,cn=config",
        "objectClass: olcDatabaseConfig",
        "objectClass: olcFrontendConfig",
        "olcDatabase: {-1}frontend",
        "",
        "dn: olcDatabase={0}config,cn=config",
        "objectClass: olcDatabaseConfig",
        "olcDatabase: {0}config",
        "olcAccess: {0}to * by dn.exact=gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth manage by * none",
        "",
        "dn: olcDatabase={1}monitor,cn=config",
        "objectClass: olcDatabaseConfig",
        "olcDatabase: {1}monitor",
        "",
        "dn: olcDatabase={2}mdb,cn=config",
        "objectClass: olcDatabaseConfig",
        "objectClass: olcMdbConfig",
        "olcDatabase: {2}mdb",
        f"olcDbDirectory: {data}",
        f"olcSuffix: {base_dn}",
        f"olcRootDN: {admin_dn}",
        f"olcRootPW: {ssha512(admin_password, 'lab-salt-0123456')}",
    ]
    return "\n".join(lines) + "\n"
