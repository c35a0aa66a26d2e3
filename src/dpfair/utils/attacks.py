"""The membership audit's vocabulary: its attacks' names and the note every output of it carries.

A leaf of its own (nothing imported), so that the command line's ``--help`` and its argument checks name the attacks
without importing the audit (scikit-learn, torch). :mod:`dpfair.audit.membership` runs the attacks.
"""

#: The attacks, in report order.
ATTACKS = ("loss", "shadow", "lira", "lira-offline")

#: Said in every output of a membership audit.
NOTE = ("membership inference is an empirical evaluation of one attack, not a privacy guarantee; a low AUC "
        "does not prove privacy, and the ε printed by training is the guarantee")
