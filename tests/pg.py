"""Start a throw-away PostgreSQL 15 server on 127.0.0.1 for integration tests.

Uses the server binaries of the machine (``/usr/lib/postgresql/*/bin``, Debian's layout;
``PG_BIN`` overrides). PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` user via ``runuser``. ``RAGAUDIT_TEST_DATABASE_URL`` skips all this and uses an
existing server.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _bin_dir() -> Path:
    env = os.environ.get("PG_BIN")
    if env:
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql (or set PG_BIN)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``start()`` -> SQLAlchemy URL of a fresh database; ``stop()`` / ``restart()``."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="ragaudit-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin:/usr/bin:/bin")
            if runuser is None:
                raise RuntimeError("running as root needs runuser (util-linux) to start PostgreSQL as 'postgres'")
            cmd = [runuser, "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)

    def start(self) -> str:
        self.sock.mkdir(parents=True)
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.sock, "postgres", "postgres")
        os.chmod(self.root, 0o700)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
        self.resume()
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute("CREATE DATABASE ragaudit_test")
        return self.url

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/ragaudit_test"

    def resume(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.sock}",
            "start",
        )

    def pause(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        try:
            self.pause()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
