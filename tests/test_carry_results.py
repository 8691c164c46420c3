"""scripts/carry_results.sh on hand-made run folders (what travels to the next node), and the merge the device
script makes of it: nothing the node already has is overwritten."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "carry_results.sh"


def run(cwd: Path, *args):
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=30)


def fake_runs(root: Path) -> None:
    cell = root / "runs" / "k2020" / "lab" / "en-es-0123"
    (cell).mkdir(parents=True)
    for name in ("results_0.csv", "results_ner-ab_0.csv", "config.json", "model_0.safetensors", "tokenizer.json"):
        (cell / name).write_text(name)
    stack = root / "runs" / "k2020" / "lab" / "stacks" / "abc"
    stack.mkdir(parents=True)
    (stack / "timing.json").write_text("{}")
    (stack / "checkpoint.pt").write_text("weights")
    (root / "runs" / "k2020" / "lab" / "queue").mkdir()
    (root / "runs" / "k2020" / "lab" / "queue" / "config.json").write_text("a job")


def test_only_the_record_files_travel(tmp_path):
    fake_runs(tmp_path)
    r = run(tmp_path, "k2020")
    assert r.returncode == 0, r.stderr
    got = sorted(str(p.relative_to(tmp_path / ".carry" / "k2020")) for p in (tmp_path / ".carry").rglob("*")
                 if p.is_file())
    assert got == ["lab/en-es-0123/config.json", "lab/en-es-0123/results_0.csv", "lab/en-es-0123/results_ner-ab_0.csv",
                   "lab/stacks/abc/timing.json"]
    assert "2 results files" in r.stdout


def test_the_node_merge_keeps_what_the_node_has(tmp_path):
    fake_runs(tmp_path)
    assert run(tmp_path, "k2020").returncode == 0
    node = tmp_path / "node"
    cell = node / "k2020" / "lab" / "en-es-0123"
    cell.mkdir(parents=True)
    (cell / "results_0.csv").write_text("measured on this node")
    # the line scripts/device_k2020.sh runs, read from the script so the test follows it
    line = next(s for s in (ROOT / "scripts" / "device_k2020.sh").read_text().splitlines() if "cp -rn" in s)
    subprocess.run(["bash", "-c", line.replace('"$runs', '"' + str(node))], cwd=tmp_path, check=True)
    assert (cell / "results_0.csv").read_text() == "measured on this node"
    assert (cell / "results_ner-ab_0.csv").read_text() == "results_ner-ab_0.csv"


def test_an_unknown_paper_names_the_ones_with_runs(tmp_path):
    fake_runs(tmp_path)
    r = run(tmp_path, "k2021")
    assert r.returncode == 2 and "no runs/k2021" in r.stderr and "k2020" in r.stderr
    assert not (tmp_path / ".carry").exists()
