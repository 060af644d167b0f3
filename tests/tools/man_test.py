#!/usr/bin/env python3
"""The man pages (docs/man/*.scd) against the tools they describe.

usage: man_test.py SOURCE_ROOT MAN_BUILD_DIR|- NAME=PATH...

For every tool: each option and each subcommand its --help prints has an
entry in its page, and each option the page documents is one the tool
takes, so that a page cannot fall behind its tool (a tool added under
tools/ without a page fails too). accel(7) lists every ACCEL_* variable the
library reads. With MAN_BUILD_DIR (the pages scdoc rendered; "-" when the
build has no man pages), every page is built and renders with man -l with
no warning and with the sections a reader expects.

Each check is a function named as a sentence; a failing check prints what
it expected and what it found, and the script exits 1.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import checklist

ROOT, MAN_DIR = sys.argv[1], sys.argv[2]
TOOLS = dict(arg.split("=", 1) for arg in sys.argv[3:])
SCD_DIR = os.path.join(ROOT, "docs", "man")
# The sections every page has, in this order; a tool's page also has OPTIONS
# and EXIT STATUS.
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "EXAMPLES", "SEE ALSO"]
TOOL_SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS",
                 "EXAMPLES", "SEE ALSO"]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def page_source(name, section):
    return read(os.path.join(SCD_DIR, "%s.%s.scd" % (name, section)))


def sections_of(scd):
    """{heading: body} of a scdoc page's level-one sections ("# NAME")."""
    out, current, literal = {}, None, False
    for line in scd.splitlines():
        if line.startswith("```"):
            literal = not literal
        m = None if literal else re.match(r"^# (.+)$", line)
        if m:
            current = m.group(1).strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return out


def unescape(text):
    # scdoc's \_ and \* are the plain characters once rendered.
    return text.replace("\\_", "_").replace("\\*", "*")


def help_text(path):
    """What --help prints, standard output and error together (a tool
    that prints its usage on stderr is still read)."""
    p = subprocess.run([path, "--help"], capture_output=True, text=True,
                       timeout=60)
    return p.stdout + p.stderr


def usage_lines(name, text):
    """The usage line and its continuation lines ("       NAME ...")."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("usage: " + name):
            inside = True
            lines.append(line[len("usage: "):])
        elif inside and re.match(r"^\s+" + re.escape(name) + r"\b", line):
            lines.append(line.strip())
        else:
            inside = False
    return lines


def help_sections(text):
    """(section, line) for each line of the help under a heading such as
    "options:" or "benchmarks:" (section lower case)."""
    section = None
    for line in text.splitlines():
        m = re.match(r"^(\S[^:]*):\s*$", line)
        if m:
            section = m.group(1).strip().lower()
        elif section is not None:
            yield section, line


def options_in_help(name, text):
    """Every option the help names: in the usage lines and as the first
    words of the lines of its "options:" section."""
    found = set()
    for line in usage_lines(name, text):
        found.update(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", line))
    for section, line in help_sections(text):
        m = re.match(r"^\s+(-[^\s,]+)(?:,\s*(-[^\s,]+))?", line)
        if section == "options" and m:
            found.update(o for o in m.groups() if o)
    return found


def subcommands_in_help(name, text):
    """Subcommands: the lower-case first word after the tool's name in each
    usage line (accel-trace convert ...), and the entries of any section
    other than "options:" (accel-bench's "benchmarks:")."""
    found = set()
    for line in usage_lines(name, text):
        m = re.match(re.escape(name) + r"\s+([a-z][a-z0-9_-]*)(\s|$)", line)
        if m:
            found.add(m.group(1))
    for section, line in help_sections(text):
        m = re.match(r"^\s+([a-z][a-z0-9_-]*)(\s{2,}|$)", line)
        if section != "options" and m:
            found.add(m.group(1))
    return found


def documented_options(scd):
    """The options a page's OPTIONS section documents: the bold words that
    begin with a dash on its entry lines (those not indented)."""
    body = sections_of(scd).get("OPTIONS", "")
    found = set()
    for line in body.splitlines():
        if line.startswith("*-"):
            found.update(re.findall(r"\*(--?[A-Za-z][\w-]*)\*", unescape(line)))
    return found


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# ---- the pages against the tools --------------------------------------------


def test_every_tool_under_tools_has_a_page_and_is_checked():
    # tools/accel-*/ with a meson.build is a tool; it needs docs/man/NAME.1.scd
    # and a place in this test's command line (tests/tools/meson.build).
    tools = sorted(d for d in os.listdir(os.path.join(ROOT, "tools"))
                   if d.startswith("accel-") and
                   os.path.isfile(os.path.join(ROOT, "tools", d, "meson.build")))
    check(tools, "no tools found under %s/tools" % ROOT)
    missing = [t for t in tools
               if not os.path.isfile(os.path.join(SCD_DIR, t + ".1.scd"))]
    check(not missing, "tools without a man page in docs/man: %s" % missing)
    unchecked = [t for t in tools if t not in TOOLS]
    check(not unchecked, "tools not passed to man_test.py (tests/tools/"
          "meson.build): %s" % unchecked)


def compare_with_each_tool(what, find):
    """Runs find(name, help_text, page_source) for every tool and fails
    with |what| and every problem it returned."""
    problems = []
    for name, path in sorted(TOOLS.items()):
        problems += find(name, help_text(path), page_source(name, 1))
    check(not problems, "\n  ".join([what] + problems))


def test_every_option_of_a_tool_is_in_its_page():
    # Each option --help prints is a bold entry of the page's OPTIONS section.
    def find(name, text, scd):
        in_help = options_in_help(name, text)
        if not in_help:
            return ["%s --help: no option found in %r" % (name, text[:300])]
        return ["%s: %s is in --help, not in %s(1)'s OPTIONS" % (name, o, name)
                for o in sorted(in_help - documented_options(scd))]
    compare_with_each_tool("pages behind their tools:", find)


def test_every_option_a_page_documents_is_one_its_tool_takes():
    # The reverse: an option removed from a tool leaves its page too.
    def find(name, text, scd):
        taken = options_in_help(name, text) | {"-h", "--help", "--version"}
        return ["%s(1) documents %s, which %s --help does not name"
                % (name, o, name) for o in sorted(documented_options(scd) - taken)]
    compare_with_each_tool("pages ahead of their tools:", find)


def test_every_subcommand_of_a_tool_is_in_its_page():
    # Each subcommand --help names is an entry of the page, described: a
    # line that starts with it in bold ("*convert* ..."), as in COMMANDS or
    # BENCHMARKS (the SYNOPSIS alone is not enough).
    def find(name, text, scd):
        entries = set(re.findall(r"^\*([a-z][a-z0-9_-]*)\*", scd, re.M))
        return ["%s: subcommand %s is in --help, not in %s(1)" % (name, c, name)
                for c in sorted(subcommands_in_help(name, text) - entries)]
    compare_with_each_tool("pages behind their tools:", find)


def test_the_help_parser_finds_what_it_must():
    # The parsing above, on a help text written here: a parser that finds
    # nothing would pass every check above.
    text = ("usage: t run FILE [--json] [-q]\n       t show X\nDoes things.\n\n"
            "options:\n  -o OUT          where (like ls -l)\n"
            "  --deep-scan     deep\n  -h, --help      help\n\n"
            "commands:\n  list      lists\n  purge-all  purges\n")
    check(options_in_help("t", text) ==
          {"--json", "-q", "-o", "--deep-scan", "-h", "--help"},
          "options parsed: %s" % sorted(options_in_help("t", text)))
    check(subcommands_in_help("t", text) == {"run", "show", "list",
                                             "purge-all"},
          "subcommands parsed: %s" % sorted(subcommands_in_help("t", text)))
    scd = "# OPTIONS\n\n*-o* _OUT_\n\tWhere *--not-an-entry*.\n\n" \
          "*-h*, *--help*\n\tHelp.\n\n# EXIT STATUS\n\n*--later*\n"
    check(documented_options(scd) == {"-o", "-h", "--help"},
          "documented options parsed: %s" % sorted(documented_options(scd)))


def test_every_page_has_the_sections_a_reader_expects():
    # NAME "page - what", then the sections in order; tools also OPTIONS and
    # EXIT STATUS. The title line names the page as its file does.
    problems = []
    for f in sorted(os.listdir(SCD_DIR)):
        if not f.endswith(".scd"):
            continue
        name, section = f[:-len(".scd")].rsplit(".", 1)
        scd = read(os.path.join(SCD_DIR, f))
        if scd.splitlines()[0] != "%s(%s)" % (name, section):
            problems.append("%s: title line %r" % (f, scd.splitlines()[0]))
        heads = list(sections_of(scd))
        want = TOOL_SECTIONS if section == "1" else SECTIONS
        order = [h for h in heads if h in want]
        if order != want:
            problems.append("%s: sections %s, want %s in that order"
                            % (f, heads, want))
        names = sections_of(scd).get("NAME", "").strip()
        if not re.match(re.escape(name) + r" - \S", names):
            problems.append("%s: NAME is %r" % (f, names))
    check(not problems, "\n  ".join(["page structure:"] + problems))


def test_see_also_names_only_pages_that_exist():
    # accel's own pages in SEE ALSO (and anywhere) exist in docs/man.
    pages = {f[:-len(".scd")] for f in os.listdir(SCD_DIR) if f.endswith(".scd")}
    problems = []
    for f in sorted(pages):
        for ref, sec in re.findall(r"\*(accel[\w-]*)\*\((\d)\)",
                                   read(os.path.join(SCD_DIR, f + ".scd"))):
            if "%s.%s" % (ref, sec) not in pages:
                problems.append("%s.scd names %s(%s)" % (f, ref, sec))
    check(not problems, "\n  ".join(["dangling references:"] + problems))


# ---- accel(7) and the environment -------------------------------------------


def library_variables():
    """ACCEL_* names the library reads: getenv("ACCEL_...") and
    accel_env_*("ACCEL_...") anywhere under lib/."""
    found = set()
    for dirpath, _, files in os.walk(os.path.join(ROOT, "lib")):
        for f in files:
            if f.endswith((".c", ".h")):
                found.update(re.findall(
                    r"\b(?:getenv|accel_env_\w+)\(\s*\"(ACCEL_[A-Z0-9_]+)\"",
                    read(os.path.join(dirpath, f))))
    return found


def test_accel_7_lists_every_environment_variable():
    # Every variable accel-info --env lists, and every one lib/ reads, is an
    # entry of accel(7)'s ENVIRONMENT section.
    env = subprocess.run([TOOLS["accel-info"], "--env"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    listed = set(re.findall(r"^(ACCEL_[A-Z0-9_]+)", env, re.M))
    read_by_lib = library_variables()
    check(listed and read_by_lib, "no variables found (--env: %d, lib/: %d)"
          % (len(listed), len(read_by_lib)))
    body = unescape(sections_of(page_source("accel", 7)).get("ENVIRONMENT", ""))
    entries = set(re.findall(r"^\*(ACCEL_[A-Z0-9_]+)\*", body, re.M))
    missing = sorted((listed | read_by_lib) - entries)
    check(not missing, "accel(7) ENVIRONMENT lacks %s" % missing)
    stale = sorted(entries - listed - read_by_lib)
    check(not stale, "accel(7) documents variables nothing reads: %s" % stale)


# ---- the rendered pages ------------------------------------------------------


def rendered_pages():
    return {f[:-len(".scd")]: os.path.join(MAN_DIR, f[:-len(".scd")])
            for f in os.listdir(SCD_DIR) if f.endswith(".scd")}


def test_every_page_is_built():
    # docs/man/meson.build renders every .scd (a page left out of its list
    # would never be installed).
    if MAN_DIR == "-":
        print("skip: the build has no man pages (-Dman=disabled or no scdoc)")
        return
    missing = [p for p, path in sorted(rendered_pages().items())
               if not os.path.isfile(path)]
    check(not missing, "not built from docs/man/*.scd: %s" % missing)


def render(path, width="80"):
    env = dict(os.environ, MANWIDTH=width, LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    env.pop("MANPAGER", None)
    env.pop("PAGER", None)
    return subprocess.run(["man", "--warnings=w", "-P", "cat", "-l", path],
                          capture_output=True, text=True, timeout=60, env=env)


def test_every_page_renders_without_warnings():
    # man -l with every groff warning on (w; "all" leaves out mac): nothing on stderr, and the text
    # has each section heading and no scdoc markup left over.
    if MAN_DIR == "-":
        print("skip: the build has no man pages")
        return
    if shutil.which("man") is None:
        raise AssertionError("man is not installed (man-db)")
    problems = []
    for page, path in sorted(rendered_pages().items()):
        section = page.rsplit(".", 1)[1]
        for width in ("80", "60"):
            p = render(path, width)
            if p.returncode != 0 or p.stderr.strip():
                problems.append("%s at %s columns: rc=%d %s" % (
                    page, width, p.returncode, p.stderr.strip()[:600]))
                continue
            text = re.sub(r".\x08", "", p.stdout)
            for head in TOOL_SECTIONS if section == "1" else SECTIONS:
                if not re.search(r"^%s$" % head, text, re.M):
                    problems.append("%s: no %s heading in the rendered text"
                                    % (page, head))
            for line in text.splitlines():
                # Markup scdoc did not take: a word wrapped in * or _ left as
                # is (C code in literal blocks has "*p" but not "*word*").
                if re.search(r"(^|\s)\*[A-Za-z-][\w-]*\*(\s|$|[,.;:)])", line):
                    problems.append("%s: markup left in %r" % (page, line))
    check(not problems, "\n  ".join(["rendering:"] + problems))


def test_the_warning_check_sees_a_bad_page():
    # The check above on a page with a roff error: it must be reported.
    if MAN_DIR == "-" or shutil.which("man") is None:
        print("skip: no man pages or no man")
        return
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad.1")
        with open(bad, "w") as f:
            f.write('.TH BAD 1\n.SH NAME\nbad \\- x\n.SH SYNOPSIS\n.nosuchrequest\n'
                    '\\*[nosuchstring]\n')
        p = render(bad)
        check(p.stderr.strip() != "",
              "man --warnings reported nothing for a page with an unknown "
              "request (stdout %r)" % p.stdout[:200])


def example_blocks(name, section):
    """The literal blocks of a page's EXAMPLES section, in order."""
    body = sections_of(page_source(name, section)).get("EXAMPLES", "")
    return re.findall(r"^```\n(.*?)^```$", body, re.M | re.S)


def write_npy(path, shape, values):
    """A float32 .npy file (format 1.0), written here without numpy."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d, " % d for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("ascii") + struct.pack("<%df" % len(values), *values))


def test_the_accel_pack_example_packs_and_inspects():
    # accel-pack(1)'s example manifest, with the reference host kernels and
    # an .npy weight beside it, packs, and accel-inspect finds its kernel and
    # weight, running the example's own commands.
    kernels = os.environ.get("ACCEL_HOST_KERNELS", "")
    check(os.path.isfile(kernels), "ACCEL_HOST_KERNELS=%r: no host kernels "
          "code object (tests/tools/meson.build sets it)" % kernels)
    blocks = example_blocks("accel-pack", 1)
    check(len(blocks) == 2, "accel-pack(1): want a manifest and the commands")
    manifest = re.search(r"^# (\S+\.manifest)", blocks[0], re.M)
    check(manifest is not None, "accel-pack(1): the manifest names no file")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, manifest.group(1)), "w") as f:
            f.write(blocks[0])
        shutil.copy(kernels, os.path.join(tmp, "libaccel_host_kernels.so"))
        write_npy(os.path.join(tmp, "embed.npy"), (3, 4), range(12))
        out = ""
        for line in blocks[1].splitlines():
            argv = line.split()
            p = subprocess.run([TOOLS[argv[0]]] + argv[1:], cwd=tmp,
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 0 and p.stderr == "",
                  "%s: rc=%d %s" % (line, p.returncode, p.stderr))
            out = p.stdout
        for want in ("vector_add", "embed"):
            check(want in out, "accel-inspect does not show %s: %r"
                  % (want, out[:600]))


def test_the_kernel_abi_example_compiles_to_a_code_object():
    # accel-kernel-abi(7)'s example builds as a host code object that
    # exports the query and its kernel, as the page says.
    blocks = example_blocks("accel-kernel-abi", 7)
    check(blocks, "accel-kernel-abi(7): no example")
    cc = shutil.which("cc")
    check(cc is not None, "no C compiler")
    with tempfile.TemporaryDirectory() as tmp:
        src, so = os.path.join(tmp, "add.c"), os.path.join(tmp, "add.so")
        with open(src, "w") as f:
            f.write(blocks[0])
        p = subprocess.run([cc, "-std=c17", "-Wall", "-Werror", "-shared",
                            "-fPIC", "-O2", "-I", os.path.join(ROOT, "include"),
                            src, "-o", so], capture_output=True, text=True,
                           timeout=120)
        check(p.returncode == 0, "the example does not build: %s" % p.stderr)
        p = subprocess.run(["nm", "-D", "--defined-only", so],
                           capture_output=True, text=True, timeout=60)
        syms = set(re.findall(r"\s[TW]\s+(\S+)$", p.stdout, re.M))
        check({"accel_kernel_library_query", "add"} <= syms,
              "the example's code object exports %s" % sorted(syms))


if __name__ == "__main__":
    checklist.main(globals())
