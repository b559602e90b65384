"""`dambreak selftest`: is this machine's backend computing what the solver needs?

For a user on hardware we never saw (a Mac with Metal, another GPU): the building blocks against
numpy (`blocks`), then a short dam break against the CPU backend of the same machine
(`dambreak_check`), each item printed with its figures and PASS or FAIL (`command`).
"""
