#!/usr/bin/python3
"""Write the commits of the kernel work tree back into kernel/patches.

usage: series-export.py SRC PATCHES [TOPIC]

Every commit in base..HEAD of SRC becomes one git format-patch file. A commit
whose subject matches a patch already in the series stays in that patch's
topic directory; a new commit goes to TOPIC (required then). The series file
keeps its '#' group headers; topics appear in the order of their commits,
which must be contiguous per topic. Old patch files of the series are replaced.
"""
import os
import re
import subprocess
import sys


def git(src, *args):
    return subprocess.run(["git", "-C", src, *args], check=True,
                          capture_output=True, text=True).stdout


def patch_subject(path):
    """The Subject header without its [PATCH ...] tag."""
    subject = patch_subject_raw(path)
    return subject and re.sub(r"^\[PATCH[^\]]*\]\s*", "", subject)


def patch_subject_raw(path):
    """The Subject header, unfolded (long subjects wrap onto ' ' lines)."""
    subject = None
    with open(path, errors="replace") as f:
        for line in f:
            if subject is not None:
                if not line.startswith((" ", "\t")):
                    break
                subject += " " + line.strip()
            elif line.startswith("Subject: "):
                subject = line[9:].strip()
            elif line == "\n":
                break
    return subject


def main():
    src, patches, new_topic = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "")
    series = os.path.join(patches, "series")
    preamble, headers, old = [], {}, []
    pending = []
    with open(series) as f:
        for line in f:
            line = line.rstrip("\n")
            entry = line.split("#")[0].strip()
            if not entry:
                # The file's own comment ends at its first blank line;
                # later comment lines head the topic that follows them.
                if not old and not pending and line.strip() \
                        and (not preamble or preamble[-1].strip()):
                    preamble.append(line)
                else:
                    pending.append(line)
                continue
            topic = os.path.dirname(entry)
            if topic not in headers:
                headers[topic] = pending
            pending = []
            old.append(entry)
    by_subject = {patch_subject(os.path.join(patches, p)): os.path.dirname(p) for p in old}

    commits = git(src, "rev-list", "--reverse", "base..HEAD").split()
    assigned = {}
    for c in commits:
        subject = git(src, "log", "-1", "--format=%s", c).strip()
        topic = by_subject.get(subject) or new_topic
        if not topic:
            sys.exit(f"series-export: new commit '{subject}' has no topic; "
                     "run: make series-export TOPIC=<directory>")
        headers.setdefault(topic, ["", f"# {topic}"])
        assigned.setdefault(topic, []).append(c)

    # Check every topic before the old patch files are removed.
    for topic, topic_commits in assigned.items():
        first, last = topic_commits[0], topic_commits[-1]
        if git(src, "rev-list", "--reverse", f"{first}^..{last}").split() != topic_commits:
            sys.exit(f"series-export: the commits of topic {topic} are not contiguous; "
                     "reorder them in the work tree first")

    for p in old:
        os.remove(os.path.join(patches, p))
    lines = list(preamble)
    # Topics in the order their commits come in the work tree (dicts keep
    # insertion order, and commits were assigned in order).
    for topic, topic_commits in assigned.items():
        lines += headers[topic]
        outdir = os.path.join(patches, topic)
        os.makedirs(outdir, exist_ok=True)
        first, last = topic_commits[0], topic_commits[-1]
        # A topic whose cover letter is "[PATCH vN 0/M]" is at version N:
        # its patches say so too (as format-patch -v would, but keeping
        # the file names the series file lists).
        prefix = "PATCH"
        cover = os.path.join(outdir, "0000-cover-letter.patch")
        if os.path.exists(cover):
            m = re.match(r"\[(PATCH v\d+) 0/", patch_subject_raw(cover) or "")
            if m:
                prefix = m.group(1)
        names = git(src, "format-patch", "--numbered", "--no-signature", "--zero-commit",
                    f"--subject-prefix={prefix}", "--abbrev=12", "-o", outdir,
                    f"{first}^..{last}").split()
        lines += [os.path.relpath(name, patches) for name in names]
    with open(series, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"series-export: {len(commits)} patches in {len(assigned)} topics written to {patches}")


if __name__ == "__main__":
    main()
