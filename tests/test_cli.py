from lmcflow.cli import main


def test_validate_and_points(capsys):
    assert main(["validate", "config/config.yaml"]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["points", "tests/configs/tiny.yaml"]) == 0
    out = capsys.readouterr().out
    assert "width-0.25" in out and "pairs=3" in out


def test_validate_rejects_bad_config(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(open("tests/configs/tiny.yaml").read().replace("seeds: [0, 1, 2]", "seeds: [0, 1]"))
    assert main(["validate", str(bad)]) == 2
    assert "seed pairs" in capsys.readouterr().err
