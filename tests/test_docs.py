"""README.md and docs/*.md: every command they show names something that exists (a Makefile target, a module run
with `python -m`, a script), and every relative link leads to a file. Reads text only: no TensorFlow."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# tools of the pinned stack, run as .venv/bin/<tool> or python -m <tool>
VENV_TOOLS = {"python", "python3", "pip", "mlflow", "dvc", "prefect", "pytest", "horovodrun", "ruff", "mypy",
              "ringflow"}
TOOL_MODULES = {"pip", "mlflow", "dvc", "prefect", "pytest", "ruff", "mypy"}
SEPARATORS = {"&&", "||", ";", "|"}
INLINE_COMMAND = re.compile(r"^(make |ringflow |python3? -m |\.venv/bin/|(bash |\./)?scripts/)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`\n]+`")


@dataclass(frozen=True)
class Command:
    """A command as a document shows it: where (`file:line`) and its text."""
    where: str
    text: str


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def make_targets(makefile: Path) -> set[str]:
    """The targets of the Makefile's rule lines (`a b: deps`), not variable assignments (`X := ...`)."""
    targets: set[str] = set()
    for line in makefile.read_text().splitlines():
        rule = re.match(r"^([A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*)[ \t]*::?(?!=)", line)
        if rule:
            targets.update(name for name in rule.group(1).split() if not name.startswith("."))
    return targets


def split_lines(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(lines of ```bash blocks, lines outside any fenced block), each with its 1-based number."""
    bash, prose = [], []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = stripped[3:].strip() if fence is None else None
        elif fence is None:
            prose.append((number, line))
        elif fence in ("bash", "sh", "shell", "console"):
            bash.append((number, line))
    return bash, prose


def commands_in(path: Path, root: Path = ROOT) -> list[Command]:
    """Every command of the ```bash blocks, and every code span of the prose that reads as a command."""
    name = path.relative_to(root).as_posix()
    bash, prose = split_lines(path.read_text())
    found = [(number, line.strip()) for number, line in bash if line.strip()]
    for number, line in prose:
        for span in CODE_SPAN.findall(line):
            text = span.strip("`").strip()
            if INLINE_COMMAND.match(text) or " && " in text:
                found.append((number, text))
    return [Command(f"{name}:{number}", text) for number, text in sorted(found, key=lambda item: item[0])]


def segments(text: str) -> list[list[str]]:
    """The simple commands of a shell line (split at &&, ||, ; and |), comments dropped, leading VAR=value and sudo
    dropped. Raises ValueError on unbalanced quotes."""
    words = shlex.split(text, comments=True)
    parts: list[list[str]] = [[]]
    for word in words:
        if word in SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(word)
    cleaned = []
    for part in parts:
        while part and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", part[0]) or part[0] == "sudo"):
            part = part[1:]
        if part:
            cleaned.append(part)
    return cleaned


def module_problem(module: str, root: Path) -> str | None:
    """Why `python -m module` would not run here; None when it would."""
    if module in TOOL_MODULES:
        return None
    base = root.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file() or (base / "__main__.py").is_file():
        return None
    return f"no module {module} in the checkout ({base.relative_to(root)}.py or {base.relative_to(root)}/__main__.py)"


def python_problem(words: list[str], root: Path) -> str | None:
    if "-m" not in words[1:]:
        return None
    index = words.index("-m")
    if index + 1 >= len(words):
        return "python -m without a module"
    return module_problem(words[index + 1], root)


def make_problem(words: list[str], targets: set[str]) -> str | None:
    goals = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
    unknown = [goal for goal in goals if goal not in targets]
    return f"no Makefile target {', '.join(unknown)}" if unknown else None


def script_problem(script: str, root: Path) -> str | None:
    return None if (root / script).is_file() else f"no file {script}"


def word_problem(words: list[str], root: Path, targets: set[str]) -> str | None:
    """Why one simple command names something that does not exist; None when it does (or is not ours to check)."""
    program = words[0]
    if program == "make":
        return make_problem(words, targets)
    if program in ("bash", "sh") and len(words) > 1 and "scripts/" in words[1]:
        return script_problem(words[1].removeprefix("./"), root)
    if program.removeprefix("./").startswith("scripts/"):
        return script_problem(program.removeprefix("./"), root)
    if program.startswith(".venv/bin/"):
        tool = program.removeprefix(".venv/bin/")
        if tool not in VENV_TOOLS:
            return f"{tool} is not a tool of the pinned stack ({', '.join(sorted(VENV_TOOLS))})"
        program = tool
    if program in ("python", "python3"):
        return python_problem(words, root)
    if program == "ringflow":
        return ringflow_problem(words)
    return None


def ringflow_problem(words: list[str]) -> str | None:
    """Why `ringflow ...` names no command of flows/command.py; None when it does."""
    from flows.command import COMMANDS
    named = next((word for word in words[1:] if not word.startswith("-")), None)
    known = ["init", *COMMANDS]
    return None if named in known else f"ringflow {named}: not a command ({', '.join(known)})"


def command_problems(command: Command, root: Path, targets: set[str]) -> list[str]:
    try:
        parts = segments(command.text)
    except ValueError as error:
        return [f"{command.where}: {command.text}: cannot be parsed as a shell line ({error})"]
    problems = (word_problem(words, root, targets) for words in parts)
    return [f"{command.where}: {command.text}: {problem}" for problem in problems if problem]


def link_problems(path: Path, root: Path = ROOT) -> list[str]:
    """Relative links of the prose whose file does not exist (web addresses and anchors of the page itself pass)."""
    name = path.relative_to(root).as_posix()
    problems = []
    for number, line in split_lines(path.read_text())[1]:
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            file, _, anchor = target.partition("#")
            if not (path.parent / file).exists():
                problems.append(f"{name}:{number}: link {target}: no such file")
            elif anchor and file.endswith(".md") and anchor not in anchors(path.parent / file):
                problems.append(f"{name}:{number}: link {target}: no heading #{anchor} in {file}")
    return problems


def anchors(page: Path) -> set[str]:
    """The anchors of a markdown page's headings, as GitHub makes them (lower case, punctuation dropped, spaces to
    hyphens)."""
    headings = [line.lstrip("#").strip() for number, line in split_lines(page.read_text())[1] if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def doc_problems(root: Path = ROOT) -> list[str]:
    """Every bad command and bad link of README.md and docs/*.md, as `file:line: ...`."""
    targets = make_targets(root / "Makefile")
    problems = []
    for path in doc_files(root):
        problems += [p for command in commands_in(path, root) for p in command_problems(command, root, targets)]
        problems += link_problems(path, root)
    return problems


def test_every_command_and_link_of_the_docs_names_something_that_exists() -> None:
    problems = doc_problems()
    assert not problems, "commands or links in README.md / docs/ that name nothing:\n  " + "\n  ".join(problems)


def test_each_docs_page_opens_with_its_command_and_the_readme_links_it() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        lines = [line for line in page.read_text().splitlines() if line.strip()]
        assert lines[0].startswith("# ") and lines[1] == "```bash", f"{page.name}: title, then a ```bash block"
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def test_the_check_finds_bad_commands_and_links(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("X := 1\n.PHONY: run\nrun: setup\n\techo\nsetup:\n")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "__main__.py").write_text("")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# t\n\n```bash\nmake run ARGS=\"--set np=1\"   # fine\nmake nosuchtarget\n"
        ".venv/bin/python -m tasks.nosuch\ngit clone x && cd y && bash scripts/setup.sh\n```\n\n"
        "Run `python -m tasks compare` or `scripts/nosuch.sh`; see [d](docs/missing.md) and [w](https://x.org).\n"
        "## A heading, with words\n"
        "[a](#a-heading-with-words) [b](README.md#a-heading-with-words) [c](README.md#nope)\n")
    problems = doc_problems(tmp_path)
    expected = ["README.md:5: make nosuchtarget: no Makefile target nosuchtarget",
                "README.md:6: .venv/bin/python -m tasks.nosuch: no module tasks.nosuch",
                "README.md:10: scripts/nosuch.sh: no file scripts/nosuch.sh",
                "README.md:10: link docs/missing.md: no such file",
                "README.md:12: link README.md#nope: no heading #nope in README.md"]
    assert len(problems) == len(expected) and all(p.startswith(e) for p, e in zip(problems, expected)), problems
    assert make_targets(tmp_path / "Makefile") == {"run", "setup"}
