"""Study mode: a researcher's collector that witnesses every session's audit rows as they are
written, the workstation's side that streams them, and the checks that compare a session folder
with what was witnessed. See docs/study.md."""
