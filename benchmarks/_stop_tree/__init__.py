"""The pieces of ``benchmarks/stop_tree.py``, one concept a module.

* ``trees`` -- the session graphs walked (wide, deep, bushy, random, diamonds
  and cycles) and the best schedule any walk could reach on each;
* ``backends`` -- where a walk sends its requests: a simulated session API
  with a set latency, or ``adapter.testing.FakeOpenCodeServer``;
* ``strategies`` -- the walks compared (``stop_tree``, the reference, level by
  level, sequential, root only, the ideal schedule);
* ``cases`` -- one tree at one latency: its runs, their timing, and the runs
  read back from a results file;
* ``report`` -- the tables and the goals met or missed;
* ``costs`` -- the per-request cost of each layer at L = 0 and the profile;
* ``plot`` -- the PNG of the random-tree series.
"""

P = 8  # permits: stop_tree's default concurrency, and the reference's semaphore
