#!/usr/bin/env python3
"""Checks that every static library under a folder holds objects for one Halide target's
architecture and object format, reading the archives themselves (no binutils for the target
needed): ELF for Linux and Android, COFF for Windows, Mach-O for macOS and iOS.

    tools/check_archives.py <folder> <halide-target>

Exit status 0 when every archive member that is an object matches, 1 otherwise.
"""
import pathlib
import struct
import sys

# (format, architecture) -> how each format spells the architecture
ELF_MACHINES = {62: "x86-64", 183: "arm-64", 3: "x86-32", 40: "arm-32"}
COFF_MACHINES = {0x8664: "x86-64", 0xAA64: "arm-64", 0x14C: "x86-32", 0x1C4: "arm-32"}
MACHO_CPUS = {0x01000007: "x86-64", 0x0100000C: "arm-64", 7: "x86-32", 12: "arm-32"}


def expected(target):
    """(format, architecture) that a Halide target string's objects must have."""
    parts = target.split(",")[0].split("-")
    arch = "-".join(parts[:2])
    os_name = parts[2] if len(parts) > 2 else "linux"
    fmt = {"windows": "coff", "osx": "macho", "ios": "macho"}.get(os_name, "elf")
    return fmt, arch


def identify(data):
    """(format, architecture) of one object file's bytes, or None if it is not an object."""
    if data[:4] == b"\x7fELF":
        little = data[5] == 1
        (machine,) = struct.unpack("<H" if little else ">H", data[18:20])
        return "elf", ELF_MACHINES.get(machine, f"machine {machine}")
    if data[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):
        (cpu,) = struct.unpack("<I", data[4:8])
        return "macho", MACHO_CPUS.get(cpu, f"cpu {cpu:#x}")
    if len(data) >= 20:
        (machine,) = struct.unpack("<H", data[:2])
        if machine in COFF_MACHINES:
            return "coff", COFF_MACHINES[machine]
    return None


def members(path):
    """(name, bytes) of each member of a System V / GNU / BSD ar archive."""
    data = path.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"{path}: not an ar archive")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode("ascii", "replace").strip()
        size = int(header[48:58].decode("ascii").strip())
        body = data[pos + 60:pos + 60 + size]
        if name.startswith("#1/"):  # BSD: the name leads the body
            length = int(name[3:])
            name, body = body[:length].rstrip(b"\0").decode("ascii", "replace"), body[length:]
        yield name, body
        pos += 60 + size + (size & 1)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    folder, target = pathlib.Path(sys.argv[1]), sys.argv[2]
    want = expected(target)
    archives = sorted(p for p in folder.rglob("*") if p.suffix in (".a", ".lib") and p.is_file())
    if not archives:
        sys.exit(f"check_archives: no .a or .lib files under {folder}")
    bad, objects = [], 0
    for archive in archives:
        for name, body in members(archive):
            if name in ("/", "//", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
                continue
            got = identify(body)
            if got is None:
                continue
            objects += 1
            if got != want:
                bad.append(f"{archive.name}({name}): {got[0]} {got[1]}")
    if bad or objects == 0:
        print(f"check_archives: expected {want[0]} {want[1]} objects for {target}; found:")
        print("\n".join("  " + b for b in bad[:20]) or "  no objects at all")
        return 1
    print(f"check_archives: {len(archives)} archives, {objects} objects, all {want[0]} {want[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
