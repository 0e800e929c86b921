"""The real Bun: version 1.4.4 from the npm registry, whose statically linked mimalloc (v3.5.3)
is the fork of seed 000, installed into the project's own folder and found there.

`make setup` runs `python -m purgecheck.measure.bun install`: it asks the registry for the
package `@oven/bun-linux-x64` at the pinned version, checks that the registry's integrity
(sha512) is the one pinned here, downloads the tarball, checks its bytes against it, and
unpacks `package/bin/bun` to `.purgecheck/bun-1.4.4/bun`. Nothing else is trusted: a tarball
whose hash differs is refused and nothing is installed.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

BUN_VERSION = "1.4.4"
BUN_PACKAGE = "@oven/bun-linux-x64"
# dist.integrity of @oven/bun-linux-x64@1.4.4 in the npm registry (npm view ... dist)
BUN_INTEGRITY = ("sha512-CHbbkmHVM28T1GFq+6GL4Ao4ujwwYwj1CxFFwEFzLanPfNsId9AhbIP0Q4reWuWBkGimUk"
                 "oQygrK7Rgjtj3vog==")
REGISTRY = os.environ.get("PURGECHECK_NPM_REGISTRY", "https://registry.npmjs.org")
PROJECT = Path(__file__).resolve().parents[2]
BUN_HOME = PROJECT / ".purgecheck" / f"bun-{BUN_VERSION}"
BUN_PATH = BUN_HOME / "bun"


class BunMissing(Exception):
    """No usable bun: the message is one line that says what to do."""


def installed_version(path: Path) -> str | None:
    """What `bun --version` prints, or None when it does not run."""
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_bun(explicit: str | None = None) -> Path:
    """The bun to measure: `explicit` (--bun PATH), else $PURGECHECK_BUN, else the project's
    own install. A BunMissing names what was looked for and how to get it."""
    given = explicit or os.environ.get("PURGECHECK_BUN")
    if given:
        path = Path(given)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise BunMissing(f"{given}: not an executable file (give --bun PATH of a bun binary)")
        if installed_version(path) is None:
            raise BunMissing(f"{given}: `{given} --version` failed; is it a bun binary?")
        return path
    if BUN_PATH.is_file() and installed_version(BUN_PATH) == BUN_VERSION:
        return BUN_PATH
    raise BunMissing(f"bun {BUN_VERSION} is not installed in {BUN_HOME}; run `make setup` (or "
                     f"`python -m purgecheck.measure.bun install`), or give --bun PATH")


def _sha512_integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _get(url: str, timeout: float = 120) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def install(dest: Path = BUN_HOME, quiet: bool = False) -> Path:
    """Install the pinned bun into `dest` (nothing to do when it is there already)."""
    target = dest / "bun"
    if target.is_file() and installed_version(target) == BUN_VERSION:
        return target
    if platform.machine() not in ("x86_64", "AMD64"):
        raise BunMissing(f"the pinned package {BUN_PACKAGE} is for x86_64; this machine is "
                         f"{platform.machine()} (give --bun PATH of a bun {BUN_VERSION})")
    meta_url = f"{REGISTRY}/{BUN_PACKAGE.replace('/', '%2f')}/{BUN_VERSION}"
    try:
        meta = json.loads(_get(meta_url, 60))
    except Exception as e:  # noqa: BLE001 - any failure to reach the registry is one line
        raise BunMissing(f"cannot read {meta_url}: {e}") from None
    dist = meta.get("dist", {})
    if dist.get("integrity") != BUN_INTEGRITY:
        raise BunMissing(f"the registry's integrity of {BUN_PACKAGE}@{BUN_VERSION} is "
                         f"{dist.get('integrity')!r}, not the pinned {BUN_INTEGRITY!r}")
    if not quiet:
        print(f"downloading {dist['tarball']}", file=sys.stderr)
    try:
        data = _get(dist["tarball"])
    except Exception as e:  # noqa: BLE001
        raise BunMissing(f"cannot download {dist['tarball']}: {e}") from None
    got = _sha512_integrity(data)
    if got != BUN_INTEGRITY:
        raise BunMissing(f"the tarball's sha512 is {got}, not the pinned {BUN_INTEGRITY}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = tar.getmember("package/bin/bun")
        src = tar.extractfile(member)
        tmp = dest / "bun.part"
        with open(tmp, "wb") as out:
            shutil.copyfileobj(src, out)
    tmp.chmod(0o755)
    tmp.replace(target)
    version = installed_version(target)
    if version != BUN_VERSION:
        raise BunMissing(f"{target} reports version {version!r}, expected {BUN_VERSION}")
    if not quiet:
        print(f"bun {BUN_VERSION} installed at {target} (integrity {BUN_INTEGRITY[:20]}...)",
              file=sys.stderr)
    return target


def main(argv: list[str]) -> int:
    if argv[:1] != ["install"] or len(argv) > 1:
        print("usage: python -m purgecheck.measure.bun install", file=sys.stderr)
        return 2
    try:
        install()
    except BunMissing as e:
        print(f"purgecheck: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
