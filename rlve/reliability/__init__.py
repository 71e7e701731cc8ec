"""What keeps a run safe to kill. `run_guard` holds one run per output directory, ends the
leftovers of an earlier one, and starts the watchdog that ends every process of the run when its
main process dies (`processes`, `watchdog`); `kill_point` lets tests kill a run at chosen places
to prove that it resumes exactly; `clean_text` makes a model's or an environment's text safe
to tokenize, log and write.

It imports only the standard library (the watchdog is a small process of its own), so that
every other part of rlve may import it.
"""
