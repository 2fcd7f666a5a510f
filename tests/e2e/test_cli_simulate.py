"""`phylorl simulate` end to end: the real console script, the files it writes, and IQ-TREE reading them."""

import json
import subprocess
from pathlib import Path

import pytest

from phylorl.cli import main
from phylorl.phylo import LikelihoodEngine, load_alignment, parse_model, read_newick


def simulate(out: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed console script, in a child process."""
    return subprocess.run(
        ["phylorl", "simulate", "--out", str(out), *args], capture_output=True, text=True, timeout=120
    )


def simulate_here(out: Path, *args: str) -> int:
    """The same entry point in this process (no interpreter start-up: keeps the many small cases fast)."""
    return main(["simulate", "--out", str(out), *args])


def test_writes_the_corpus_files(tmp_path):
    out = tmp_path / "corpus"
    result = simulate(out, "--count", "3", "--taxa", "5:9", "--sites", "100:200", "--seed", "7")
    assert result.returncode == 0, result.stderr
    assert "simulating" in result.stderr and "3/3" in result.stderr  # the progress bar's last frame
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 7
    assert manifest["args"] == {"count": 3, "taxa": [5, 9], "sites": [100, 200], "model": None, "gaps": 0.0}
    assert [d["name"] for d in manifest["datasets"]] == ["sim_0000", "sim_0001", "sim_0002"]
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"] + sorted(
        f"sim_{i:04d}{suffix}" for i in range(3) for suffix in (".fasta", ".model.txt", ".true.nwk")
    )
    for entry in manifest["datasets"]:
        alignment = load_alignment(out / entry["fasta"])
        assert alignment.taxa == tuple(f"t{i}" for i in range(1, entry["n_taxa"] + 1))
        assert 5 <= entry["n_taxa"] <= 9 and 100 <= entry["n_sites"] <= 200
        assert alignment.n_sites == entry["n_sites"]
        tree = read_newick(out / entry["tree"], alignment)
        assert tree.lengths.sum() == pytest.approx(entry["tree_length"], abs=1e-6)
        model = (out / entry["model_file"]).read_text().strip()
        assert model == entry["model"] and parse_model(model).free_parameters == ()
        assert str(parse_model(model)) == model


def test_same_seed_gives_byte_identical_files(tmp_path):
    args = ("--taxa", "6:8", "--sites", "50:80", "--gaps", "0.05")
    for name, count, seed in (("a", "3", "11"), ("b", "3", "11"), ("c", "2", "11"), ("d", "3", "12")):
        assert simulate_here(tmp_path / name, "--count", count, "--seed", seed, *args) == 0
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    for name in ("sim_0000.fasta", "sim_0001.true.nwk", "sim_0001.model.txt"):  # independent of --count
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "c" / name).read_bytes(), name
    assert (tmp_path / "a" / "sim_0000.fasta").read_bytes() != (
        tmp_path / "d" / "sim_0000.fasta"
    ).read_bytes()


def test_fixed_model(tmp_path):
    assert (
        simulate_here(
            tmp_path, "--count", "2", "--taxa", "4", "--sites", "30", "--model", "hky{3}+FQ+G4{0.5}"
        )
        == 0
    )
    for i in range(2):
        assert (tmp_path / f"sim_{i:04d}.model.txt").read_text() == "HKY{3}+FQ+G4{0.5}\n"


def test_refuses_to_overwrite_without_force(tmp_path, capsys):
    assert simulate_here(tmp_path, "--count", "1", "--taxa", "4", "--sites", "20") == 0
    capsys.readouterr()
    assert simulate_here(tmp_path, "--count", "2", "--taxa", "4", "--sites", "20") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"phylorl simulate: error: {str(tmp_path)!r} already holds manifest.json, sim_0000.fasta, "
        "sim_0000.true.nwk and 1 more; pass --force to overwrite"
    ]
    assert not (tmp_path / "sim_0001.fasta").exists()
    assert simulate_here(tmp_path, "--count", "2", "--taxa", "4", "--sites", "20", "--force") == 0
    assert (tmp_path / "sim_0001.fasta").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (("--taxa", "3:x"), "--taxa must be an integer N or a range A:B, got '3:x'"),
        (("--taxa", "3"), "--taxa must be at least 4, got '3'"),
        (("--sites", "500:300"), "--sites range '500:300' is empty: A must be <= B in A:B"),
        (("--gaps", "1.5"), "--gaps must be a fraction in [0, 1), got 1.5"),
        (
            ("--model", "GTR+F+G4"),
            "model 'GTR+F+G4' is not fully specified: give numbers for exchangeabilities, alpha",
        ),
        (("--model", "GTR{1,2}"), "GTR takes 5 rates (AC,AG,AT,CG,CT; GT = 1) or 6, got 2"),
        (
            ("--model", "HKY{3}+F"),
            "uses empirical frequencies (+F), which a simulation cannot take from data",
        ),
        (("--count", "0"), "--count must be at least 1, got 0"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert simulate_here(tmp_path / "out", "--count", "1", *args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("phylorl simulate: error: ") and message in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_bad_argument_from_the_console_script(tmp_path):
    result = simulate(tmp_path / "out", "--count", "2", "--taxa", "3:x")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "phylorl simulate: error: --taxa must be an integer N or a range A:B, got '3:x'"
    ]
    assert result.stdout == "" and not (tmp_path / "out").exists()


def test_iqtree_reads_the_files_and_agrees_on_the_likelihood(tmp_path, iqtree_fixed):
    """`iqtree2 -s sim.fasta -te sim.true.nwk -m "$(cat sim.model.txt)" -blfix` equals our engine."""
    result = simulate(
        tmp_path, "--count", "3", "--taxa", "10:16", "--sites", "300:500", "--seed", "3", "--gaps", "0.05"
    )
    assert result.returncode == 0, result.stderr
    models = []
    for i in range(3):
        fasta = tmp_path / f"sim_{i:04d}.fasta"
        newick = (tmp_path / f"sim_{i:04d}.true.nwk").read_text()
        model = (tmp_path / f"sim_{i:04d}.model.txt").read_text().strip()
        alignment = load_alignment(fasta)
        ours = LikelihoodEngine(alignment, model).loglik(read_newick(newick, alignment))
        assert iqtree_fixed(fasta, newick, model).loglik == pytest.approx(ours, abs=2e-3)
        models.append(parse_model(model))
    assert any(m.invariant for m in models) and not all(m.invariant for m in models)  # both kinds checked
