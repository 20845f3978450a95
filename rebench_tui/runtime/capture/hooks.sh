# rebench command capture: reports each command line of an interactive bash to the capture
# daemon (start: time, working directory, text; end: time, exit status). Installed as
# /etc/profile.d/zz-rebench.sh and sourced from /etc/bash.bashrc, loaded once per shell.
# The hooks start no processes (no $(...), no pipes), so they add nothing to the process table
# the daemon watches. Removing them does not hide commands: the daemon also reports commands
# started by a shell whose hooks are off.
if [ -n "${BASH_VERSION:-}" ] && [[ $- == *i* ]] && [ -z "${__rb_loaded:-}" ]; then
__rb_loaded=1
__rb_seq=0
__rb_armed=0
__rb_on=0
__rb_hist=
__rb_tmp=/dev/shm/.rebench-hook-$$
if [ -p /run/rebench-capture/hooks.fifo ] && [ -r /run/rebench-capture/capture.pid ]; then
  read -r __rb_dpid < /run/rebench-capture/capture.pid
  # only a live daemon keeps the FIFO open; opening it for writing would block without one
  if [ -n "$__rb_dpid" ] && [ -d "/proc/$__rb_dpid" ] && exec {__rb_fd}>/run/rebench-capture/hooks.fifo; then __rb_on=1; fi
fi
__rb_now() { __rb_t=${EPOCHREALTIME/./}; __rb_t=${__rb_t:0:${#__rb_t}-3}; }
__rb_send() { [ "$__rb_on" = 1 ] && printf '%s' "$1" >&"$__rb_fd"; }
__rb_last() {  # the newest history entry, without a subshell: "NUMBER TEXT" -> __rb_hn, __rb_ht
  builtin history 1 > "$__rb_tmp" 2>/dev/null || { __rb_hn=; __rb_ht=; return; }
  IFS= read -r -d '' __rb_ht < "$__rb_tmp"
  __rb_ht=${__rb_ht%$'\n'}
  __rb_hn=${__rb_ht%%[^ 0-9]*}
  __rb_ht=${__rb_ht#"$__rb_hn"}
}
__rb_preexec() {
  [ "$__rb_armed" = 1 ] || return 0
  [ -n "${COMP_LINE:-}" ] && return 0
  __rb_armed=0
  local src=history line n1 n2 LC_ALL=C
  HISTTIMEFORMAT= __rb_last
  if [ -z "$__rb_hn" ] || [ "$__rb_hn" = "$__rb_hist" ]; then
    line=$BASH_COMMAND; src=debug  # history did not record this line (off, a leading space, a repeat)
  else
    __rb_hist=$__rb_hn; line=$__rb_ht
  fi
  __rb_seq=$((__rb_seq + 1))
  __rb_now
  n1=${#PWD}; n2=${#line}
  __rb_send "start $$ $__rb_seq $__rb_t $src $n1 $n2"$'\n'"$PWD$line"$'\n'
  [ -n "${REBENCH_TTYLOG:-}" ] && printf '\033]7770;start;%s\007' "$__rb_seq"
  return 0
}
# The session's time left in the prompt and its warnings before the next prompt, from the files the
# app keeps in the `task` command's spool folder (read with builtins: no process is started).
__rb_task=${REBENCH_TASK_DIR:-/run/rebench-task}
__rb_left=
__rb_wseen=
[ -r "$__rb_task/warning" ] && read -r __rb_wseen __rb_wtext < "$__rb_task/warning"
__rb_task_prompt() {
  __rb_left=
  [ -r "$__rb_task/prompt" ] && IFS= read -r __rb_left < "$__rb_task/prompt"
  local seq text
  if [ -r "$__rb_task/warning" ] && read -r seq text < "$__rb_task/warning" && [ "$seq" != "$__rb_wseen" ]; then
    __rb_wseen=$seq
    printf '\n[rebench] %s\n' "$text" >&2
  fi
  case $PS1 in *__rb_left*) ;; *) PS1='${__rb_left:+[$__rb_left] }'"$PS1" ;; esac
}
__rb_precmd() {
  local rc=${__rb_rc:-0}
  if [ "$__rb_armed" = 0 ] && [ "$__rb_seq" -gt 0 ]; then
    [ -n "${REBENCH_TTYLOG:-}" ] && printf '\033]7770;end;%s;%s\007' "$__rb_seq" "$rc"
    __rb_now
    __rb_send "end $$ $__rb_seq $__rb_t $rc"$'\n'
  fi
  __rb_task_prompt  # after the end marker: a warning is not part of the command's output
  __rb_armed=1
  return 0
}
__rb_send "hello $$ ${REBENCH_TTYLOG:--}"$'\n'
__rb_bye() { __rb_send "bye $$"$'\n'; }
trap __rb_bye EXIT
HISTTIMEFORMAT= __rb_last; __rb_hist=$__rb_hn
trap '__rb_preexec' DEBUG
# The exit status is taken first; our end record comes last, so commands in a prompt command of
# the participant's own run while the hooks are disarmed and are not mistaken for theirs.
PROMPT_COMMAND="__rb_rc=\$?;${PROMPT_COMMAND:+$PROMPT_COMMAND;}__rb_precmd"
fi
