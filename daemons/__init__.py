"""htcpool's daemons, their shared core and the command line.

Loading htcondor2 configures HTCondor's ClassAd library as HTCondor's daemons run it:
among other things `CurrentTime` becomes the library's own (the time) rather than a
reference to another ad, which changes what `externalRefs` reports (significant
attributes, autoclustering, the collector's and startd's analyses). Every daemon loads
htcondor2 for its configuration anyway; loading it with the package makes every ClassAd
analysis the same whatever was imported first (a unit test run alone once saw
CurrentTime as a reference, and in the whole suite not).
"""
import htcondor2  # noqa: F401
