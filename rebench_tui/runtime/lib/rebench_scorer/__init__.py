"""Helpers for environment scorers, shipped into every sandbox at ``/opt/rebench/lib``.

A scorer imports them with::

    sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
    from rebench_scorer import result, participant

- :mod:`result`: the only way a result leaves the scorer (its private result channel).
- :mod:`participant`: start the participant's code in a process of its own, as the participant's
  user, with its own output and a narrow control channel.
- :mod:`channel`: the framed messages (and file descriptors) on that channel; the worker side
  imports it too (this folder is readable by everyone, nothing in it is secret).
- :mod:`withhold`: text the participant's code made, kept out of a result the participant reads
  (where the code held data the participant never sees).
- :mod:`arrays`: tensors shared between the two processes (memfd on the CPU, CUDA IPC on a GPU).

Standard library only, except :mod:`arrays`, which imports torch when used.
"""
