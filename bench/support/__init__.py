"""What the benchmarks share and that is not a benchmark itself: scratch databases, ``manage.py``
and free ports (``scratch``). Imported as ``support.*`` (the benchmarks run as scripts, with bench/
on the path) or ``bench.support.*`` with the repository's root on it.
"""
