"""bench/token_blocks.py: a tile at least as wide as every expert's rows streams each active
expert's weights once (streams 1.00) and its efficiency is the real rows over the computed ones;
narrower tiles stream more; a shape is read from its benchmark config; bad arguments are refused
by name."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "bench", "token_blocks.py")
sys.path.insert(0, os.path.dirname(script))
import token_blocks  # noqa: E402


def run(*args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def main():
    # cost(): 3 experts with 5, 0 and 17 rows.
    assert token_blocks.cost([5, 0, 17], 32) == (1.0, 22 / 64)
    assert token_blocks.cost([5, 0, 17], 8) == ((1 + 3) / 2, 22 / 32)
    assert token_blocks.cost([0, 0], 16) == (0.0, 0.0)
    # Routing: every token takes top_k distinct experts.
    rows = token_blocks.rows_per_expert(8, 2, 100, token_blocks.random.Random(3))
    assert sum(rows) == 200 and len(rows) == 8, rows
    # One expert, every token: 64 rows; tiles of 64 and 16.
    r = run("--experts", "1", "--top-k", "1", "--tokens", "64", "--tiles", "64,16")
    assert r.returncode == 0, r.stderr
    assert "| 64 | 64.0 | 1.00 / 1.00 | 4.00 / 1.00 |" in r.stdout, r.stdout
    # A shape from configs/bench: Mixtral's 8 experts, top 2.
    r = run("--shape", "mixtral_8x7b", "--tokens", "4", "--tiles", "128", "--trials", "2")
    assert r.returncode == 0 and "experts=8 top_k=2" in r.stdout, r.stdout + r.stderr
    for args, words in [
        (["--experts", "4", "--top-k", "5", "--tokens", "8"], "top_k=5 must be in [1, experts=4]"),
        (["--shape", "no_such_shape", "--tokens", "8"], "no benchmark config"),
        (["--experts", "4", "--top-k", "1", "--tokens", "8,x"], "comma-separated integers"),
        (["--tokens", "8"], "give --shape, or --experts and --top-k"),
    ]:
        r = run(*args)
        assert r.returncode != 0 and words in r.stderr, (args, r.stderr)
    print("token_blocks: ok")


if __name__ == "__main__":
    main()
