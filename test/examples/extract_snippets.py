#!/usr/bin/env python3
"""Turns every ```cpp block of a Markdown file (docs/api.md) into one C++
program that compiles each block and runs it against a real engine.

Conventions (docs/api.md states them for readers):
- A block is a fragment by default: it becomes the body of
  `void run(uvcl::Engine& engine)`, called with a fresh engine that owns its
  loop; after it returns the runner calls engine.finish() and expects Ok.
- A block that defines `int main(` is a whole program: `main` is renamed
  and called; it must return 0.
- `#include` lines anywhere in a block move to the top of the program.
- A block whose first line is `// compile-only` is compiled but not run.
- ```cpp blocks only; ```c++ or other fences are ignored.

Usage: extract_snippets.py INPUT.md OUTPUT.cpp"""
import re
import sys


def blocks(text):
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            out.append((start + 1, lines[start:j]))  # 1-based line of the first code line
            i = j + 1
        else:
            i += 1
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    found = blocks(open(src).read())
    includes = ["<cassert>", "<cstddef>", "<cstdint>", "<cstdio>", "<cstring>", "<memory>", "<span>", "<string>", "<vector>", "<uv.h>",
                "<uvcl/engine.hpp>"]
    units = []
    for n, (line, code) in enumerate(found):
        body = []
        for l in code:
            m = re.match(r"\s*#include\s+(\S+)", l)
            if m:
                if m.group(1) not in includes:
                    includes.append(m.group(1))
                continue
            body.append(l)
        compile_only = bool(code) and code[0].strip() == "// compile-only"
        text = "\n".join(body)
        is_main = re.search(r"\bint\s+main\s*\(", text) is not None
        units.append((n, line, text, is_main, compile_only))

    o = [f"// Generated from {src} by test/examples/extract_snippets.py. Do not edit.",
         "// NOLINTBEGIN"]
    o += [f"#include {i}" for i in includes]
    o.append("")
    for n, line, text, is_main, _ in units:
        o.append(f"// {src}:{line}")
        o.append(f"namespace snippet_{n} {{")
        if is_main:
            o.append(f"#line {line} \"{src}\"")
            o.append(re.sub(r"\bint\s+main\s*\(", "int main_(", text))
        else:
            o.append("[[maybe_unused]] void run([[maybe_unused]] uvcl::Engine& engine) {")
            o.append(f"#line {line} \"{src}\"")
            o.append(text)
            o.append("}")
        o.append(f"}}  // namespace snippet_{n}")
        o.append("")
    o.append("int main() {")
    o.append("  int failed = 0;")
    for n, line, _, is_main, compile_only in units:
        where = f"{src}:{line}"
        if compile_only:
            o.append(f'  std::printf("snippet {where}: compiled (compile-only)\\n");')
            continue
        if is_main:
            o.append("  {")
            o.append(f"    const int rc = snippet_{n}::main_();")
            o.append(f'    std::printf("snippet {where}: %s (exit %d)\\n", rc == 0 ? "ok" : "FAILED", rc);')
            o.append("    failed += rc != 0;")
            o.append("  }")
            continue
        o.append("  {")
        o.append("    auto e = uvcl::Engine::create(uvcl::Config{});")
        o.append("    if (!e) {")
        o.append(f'      std::printf("snippet {where}: FAILED: Engine::create: %s\\n", e.error().to_string().c_str());')
        o.append("      return 1;")
        o.append("    }")
        o.append(f"    snippet_{n}::run(*e.value());")
        o.append("    auto r = e.value()->finish();")
        o.append(f'    std::printf("snippet {where}: %s%s\\n", r ? "ok" : "FAILED: finish: ", '
                 'r ? "" : r.error().to_string().c_str());')
        o.append("    failed += !r;")
        o.append("  }")
    o.append(f'  std::printf("%d of {len(units)} snippets failed\\n", failed);')
    o.append("  return failed == 0 ? 0 : 1;")
    o.append("}")
    o.append("// NOLINTEND")
    open(dst, "w").write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
