"""libuvcl.so exports the public API and nothing else.

Compares the library's dynamic symbols with what the public headers
(include/uvcl/) mark UVCL_EXPORT:
- the C functions exported are exactly those uvcl.h declares;
- every C++ symbol is in namespace uvcl, of a function the headers declare
  UVCL_EXPORT or a member of a class they declare UVCL_EXPORT (and the
  member's name is in that header);
- every UVCL_EXPORT C++ function is exported.
Usage: exported_symbols.py LIBUVCL_SO INCLUDE_DIR"""
import glob
import os
import re
import subprocess
import sys

lib, include = sys.argv[1], sys.argv[2]
headers = {p: open(p).read() for p in glob.glob(os.path.join(include, "uvcl", "*"))}
c_header = headers[os.path.join(include, "uvcl", "uvcl.h")]
cpp_text = "\n".join(t for p, t in headers.items() if p.endswith(".hpp"))

c_declared = set(re.findall(r"^UVCL_EXPORT [^(;]*?\b(uvcl_\w+)\(", c_header, re.M))
cpp_functions = set(re.findall(r"UVCL_EXPORT [^(;{}]*?\b(\w+)\(", cpp_text))
cpp_classes = set(re.findall(r"(?:class|struct) UVCL_EXPORT (\w+)", cpp_text))

out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
mangled = [line.split()[-1] for line in out.splitlines() if line.split()]
demangled = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True,
                           check=True).stdout.splitlines()

problems = []
c_exported = set()
cpp_exported_functions = set()
for raw, name in zip(mangled, demangled):
    if raw.startswith("uvcl_"):
        c_exported.add(raw)
        continue
    plain = re.sub(r"\[abi:\w+\]", "", name)
    plain = re.sub(r"^(typeinfo name for|typeinfo for|vtable for) ", "", plain)
    qualified = plain.split("(")[0].strip()
    if not qualified.startswith("uvcl::"):
        problems.append(f"{name}: exported, but not in namespace uvcl")
        continue
    parts = qualified.split("::")[1:]
    if len(parts) >= 2 and parts[0] in cpp_classes:
        member = parts[-1].lstrip("~")
        if member not in cpp_text:
            problems.append(f"{name}: a member of {parts[0]} the public headers do not name")
        continue
    if parts[-1] in cpp_functions:
        cpp_exported_functions.add(parts[-1])
        continue
    problems.append(f"{name}: exported, but neither a UVCL_EXPORT function nor a member of a UVCL_EXPORT class")

for f in sorted(c_declared - c_exported):
    problems.append(f"{f}: declared in uvcl.h, not exported")
for f in sorted(c_exported - c_declared):
    problems.append(f"{f}: exported, not declared UVCL_EXPORT in uvcl.h")
for f in sorted(cpp_functions - cpp_exported_functions):
    problems.append(f"uvcl::{f}: declared UVCL_EXPORT, not exported")

print(f"{len(mangled)} symbols exported: {len(c_exported)} C functions, "
      f"{len(mangled) - len(c_exported)} C++ (classes {', '.join(sorted(cpp_classes))})")
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
