"""One shared training loop (loop.py) and one small module per training regime."""
