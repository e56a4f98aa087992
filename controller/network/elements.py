"""The names of the elements that may delay a link, as a spec names them (`delay_element`).

"auto" is netem where the kernel has it, else cclab-delay, the user-space delay line in delay/; choosing
and running one is controller.dataplane.delay's.
"""

NETEM = "netem"
CCLAB_DELAY = "cclab-delay"
#: what a spec or a caller may ask for
DELAY_ELEMENTS = ("auto", NETEM, CCLAB_DELAY)
