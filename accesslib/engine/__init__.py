"""torch computations on one model: the greedy decoder, the cramming engine and its protocol
table, targets, geometry of the hidden space, precision tests and the copy task.
May import models and theory.
"""
