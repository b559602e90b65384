"""Checking runs: one run against another (`dambreak compare`), a run against experiments
(`dambreak validate`), and pictures of a run without ParaView (`dambreak render`).

Everything here reads run folders written by `dambreak run` (see `run_folder.RunFolder`) and
never changes them; reports and figures go to folders of their own.
"""
