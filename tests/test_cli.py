from lmcflow.cli import main


def test_validate_and_points(capsys):
    assert main(["validate", "config/config.yaml"]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["points", "tests/configs/tiny.yaml"]) == 0
    out = capsys.readouterr().out
    assert "width-0.25" in out and "pairs=3" in out
    assert main(["points", "tests/configs/tiny_identifiability.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    groups = {line.split()[1]: line.split("group=")[1] for line in lines}
    assert groups["dataset-gs_k8__sigma_f-1"] == groups["kind-standard"] == "grid"
    assert main(["points", "tests/configs/tiny.yaml"]) == 0  # width 0.25 alone; width 1's two weight decays share
    groups = [line.split("group=")[1] for line in capsys.readouterr().out.splitlines()]
    # the untrained partners of width 1 (tiny.yaml's random-feature reference) train alone: 0 epochs
    assert groups == ["width-0.25__weight_decay-0.003", "grid__width-1", "grid__width-1",
                      "width-1__weight_decay-0.003__partner-untrained"]


def test_validate_rejects_bad_config(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(open("tests/configs/tiny.yaml").read().replace("seeds: [0, 1, 2]", "seeds: [0]"))
    assert main(["validate", str(bad)]) == 2
    assert "seed pairs" in capsys.readouterr().err


def test_claims_prints_the_paper_beside_ours(tmp_path, capsys):
    from lmcflow.claims import claim_row
    from lmcflow.tables import write_table
    from tests.claim_tables import verdict
    from tests.test_claim_power import CASES

    res = verdict("width-merge-accuracy", CASES["width-merge-accuracy"](True))
    res["scale"] = {"dataset": ["fashion_mnist"], "arch": ["mlp"], "widths": [0.25, 1.0, 4.0], "epochs": [5]}
    (tmp_path / "tables").mkdir()
    write_table(tmp_path / "tables/claims.parquet", "claims", [claim_row(res)])
    assert main(["claims", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "width-merge-accuracy" in out and "supported" in out and "n_seeds=6" in out
    assert "paper: plain-average midpoint error barrier at the widest width = 0.0052 (MLP, 16x width, MNIST)" in out
    assert "| ours: 0.00" in out and "arch=['mlp']" in out
