"""Commands that set up, run and check the project (each file says how to run it), and `testing/`:
what the tests and the benchmarks both drive."""
