#!/usr/bin/env python3
"""Each man page's OPTIONS and its tool's own option list agree.

    scripts/man-options.py TOOLDIR [PAGE...]

For every PAGE (default: tools/man/*.[1-8]) the tool of the same name
(ublkd.8: TOOLDIR/ublkd) is run with --help, and the options it lists are
compared with the tags of the page's OPTIONS section, both ways: an option
the tool lists that the page lacks fails, and so does one the page
documents that the tool does not list. Options are compared as the groups
a tag or a help entry gives ("-Q, --sqpoll" is one option with two
spellings), so a page that pairs a short option with the wrong long one
fails too. Exit status 0 when every page agrees, 1 otherwise.

What counts as the tool's list depends on how it prints it (HELP below):
  table     one option per line, indented, the option column first
            ("  -s, --src DEV  a source range"; blkcopy, iobench);
  synopsis  usage lines, every -x / --long in them is an option, and
            "-g|--get-data" one option with two spellings (ublkd, whose
            --help prints the usage and exits 0; vblk-pt, which has no
            --help and prints its usage, exit 2, for any command line it
            does not take).
On the page, the option entries are the tag lines of the .TP paragraphs
between ".SH OPTIONS" and the next .SH (subsections included); text in a
paragraph's body (e.g. "Also --queues.") is not an entry.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# tool: how its --help lists the options
HELP = {
    'blkcopy': 'table',
    'iobench': 'table',
    'ublkd': 'synopsis',
    'vblk-pt': 'synopsis',
}

# -x or --long-name, not inside a word ("vblk-pt", "read-only")
OPT = r'(?<![\w-])--?[A-Za-z][\w-]*'
OPT_RE = re.compile(OPT)
# "-g|--get-data": alternative spellings of one option
ALT_RE = re.compile(OPT + r'(?:\|' + OPT[len(r'(?<![\w-])'):] + r')*')


def help_text(tool):
    """The tool's --help output; exit status 0 or 2 (usage) are both fine."""
    try:
        p = subprocess.run([tool, '--help'], capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
    except OSError as e:
        raise SystemExit(f'man-options: cannot run {tool}: {e}')
    out = p.stdout + p.stderr
    if p.returncode not in (0, 2):
        raise SystemExit(f'man-options: {tool} --help exited {p.returncode}:\n{out}')
    return out


def help_options(text, style):
    groups = set()
    for line in text.splitlines():
        if style == 'table':
            m = re.match(r'^\s+(-\S.*?)(?:\s{2,}|\s:\s|$)', line)
            if m:
                opts = OPT_RE.findall(m.group(1))
                if opts:
                    groups.add(frozenset(opts))
        else:
            for alt in ALT_RE.findall(line):
                groups.add(frozenset(alt.split('|')))
    return groups


def roff_text(line):
    """A man(7) text or font-macro line as it reads, fonts dropped."""
    if line.startswith(('.', "'")):
        words = line[1:].split(None, 1)
        macro = words[0] if words else ''
        try:
            args = shlex.split(words[1].replace('\\', '\\\\')) if len(words) > 1 else []
        except ValueError:
            args = words[1:]
        # alternating-font macros join their arguments without a space
        sep = '' if len(macro) == 2 and set(macro) <= set('BIR') else ' '
        line = sep.join(args)
    line = re.sub(r'\\f(?:[BIRP]|\(..|\[[^]]*\])', '', line)
    line = line.replace('\\-', '-').replace('\\&', '').replace('\\(aq', "'")
    return line.replace('\\e', '\\')


def page_options(path):
    groups = set()
    in_options = False
    tag_next = False
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if line.startswith('.\\"'):
                continue
            if line.startswith('.SH'):
                in_options = roff_text(line).strip().upper() == 'OPTIONS'
                tag_next = False
                continue
            if not in_options:
                continue
            if line.split(None, 1)[:1] == ['.TP']:
                tag_next = True
                continue
            if tag_next:
                tag_next = False
                opts = OPT_RE.findall(roff_text(line))
                if opts:
                    groups.add(frozenset(opts))
    return groups


def show(group):
    return ', '.join(sorted(group, key=lambda o: (o.startswith('--'), o.lower())))


def check(tooldir, path):
    name = os.path.basename(path).rsplit('.', 1)[0]
    page = os.path.relpath(path, REPO) if path.startswith(REPO + '/') else path
    style = HELP.get(name)
    if style is None:
        print(f'{page}: no entry for {name} in HELP of {sys.argv[0]}')
        return False
    tool = os.path.join(tooldir, name)
    text = help_text(tool)
    want = help_options(text, style)
    have = page_options(path)
    if not want:
        print(f'{page}: no options found in `{name} --help`:\n{text}')
        return False
    if not have:
        print(f'{page}: no option tags in its OPTIONS section')
        return False
    ok = report(page, want - have, set().union(*have),
                'listed together by --help, not in one tag',
                f"in `{name} --help`, not in the page's OPTIONS")
    ok &= report(page, have - want, set().union(*want),
                 'one tag in the page, not one entry of --help',
                 f"in the page's OPTIONS, not in `{name} --help`")
    if ok:
        print(f'    {os.path.basename(page)}: {len(want)} options, as {name} --help lists them')
    return ok


def report(page, extra, other_options, split, missing):
    """Print each option group of EXTRA, which one side lists and the other
    does not: as SPLIT when the other side has all its spellings (in other
    groups), else as MISSING. True when EXTRA is empty."""
    for g in sorted(extra, key=show):
        print(f'{page}: {show(g)}: {split if g <= other_options else missing}')
    return not extra


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ('-h', '--help'):
        print(__doc__.strip(), file=sys.stdout if len(sys.argv) >= 2 else sys.stderr)
        return 0 if len(sys.argv) >= 2 else 2
    tooldir = sys.argv[1]
    pages = sys.argv[2:] or sorted(glob.glob(os.path.join(REPO, 'tools/man/*.[1-8]')))
    ok = True
    for page in pages:
        ok &= check(tooldir, page)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
