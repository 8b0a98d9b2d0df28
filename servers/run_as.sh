#!/usr/bin/env bash
# servers/run_as.sh USER PATH... -- COMMAND...: run by root, COMMAND as USER (exec: COMMAND keeps this pid), with
# USER's groups and USER's own rights.
# COMMAND needs the PATHs (the Python it runs on, the virtual environment, the data it keeps). Where a folder on the
# way to one of them is closed to USER (a Python of pyenv under /root, a checkout in a home of mode 0700), COMMAND
# runs in a mount namespace of its own in which that folder is an empty tmpfs holding only those PATHs (what systemd
# does with TemporaryFileSystem= and BindPaths=): USER reaches what COMMAND needs and nothing else of that folder,
# and no folder's mode changes for anyone else.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "error: only root runs a command as another user" >&2; exit 1; }
user=$1; shift
paths=()
add_path() { local known; for known in "${paths[@]}"; do [ "$known" != "$1" ] || return 0; done; paths+=("$1"); }
while [ "${1:-}" != -- ]; do [ $# -gt 0 ] || { echo "error: usage: $0 USER PATH... -- COMMAND" >&2; exit 1; }
  add_path "$(realpath -ms "$1")"  # the path as named (a checkout's .venv may be a link to another's)
  add_path "$(realpath -m "$1")"   # and where it leads
  shift
done
shift

as_user=(setpriv --reuid "$user" --regid "$(id -g "$user")" --init-groups --)

closed_folder() {  # $1 path: the first folder on its way that the user cannot pass, or nothing
  local folder="" part
  local -a parts
  IFS=/ read -ra parts <<< "${1#/}"
  for part in "${parts[@]}"; do
    folder+=/$part
    "${as_user[@]}" test -x "$folder" || { echo "$folder"; return; }
  done
}

needs_namespace() {
  local path
  for path in "${paths[@]}"; do [ -z "$(closed_folder "$path")" ] || return 0; done
  return 1
}

open_paths() {  # inside the namespace: each closed folder replaced by a tmpfs holding only the paths below it
  local path closed stash inner source i
  local -a targets sources
  for path in "${paths[@]}"; do
    closed=$(closed_folder "$path")
    [ -n "$closed" ] || continue
    stash=$(mktemp -d)  # the folder's real content, reachable (to root) while the tmpfs hides it
    mount --bind "$closed" "$stash"
    targets=() sources=()
    for inner in "${paths[@]}"; do  # where each one leads, found before the tmpfs hides it (a link, say)
      case $inner in "$closed"/*) ;; *) continue ;; esac
      source=$(realpath -m "$inner")
      case $source in "$closed"/*) source=$stash/${source#"$closed"/} ;; esac
      targets+=("$inner") sources+=("$source")
    done
    mount -t tmpfs -o mode=0755,size=1m ringflow-paths "$closed"
    for i in "${!targets[@]}"; do mkdir -p "${targets[i]}" && mount --rbind "${sources[i]}" "${targets[i]}"; done
    umount -l "$stash" && rmdir "$stash"
  done
}

own_namespace() {  # whether this script runs in a mount namespace of its own: not the one of what started it
  # (the unshare below runs this script again in the same process, whose parent stays in the first namespace; no
  # variable or argument a caller could set decides it: open_paths in the caller's namespace mounts over its folders)
  local stat mine theirs
  local -a fields
  stat=$(< "/proc/$$/stat")
  read -ra fields <<< "${stat##*) }"  # state, parent's pid, ...
  mine=$(readlink /proc/self/ns/mnt) && theirs=$(readlink "/proc/${fields[1]}/ns/mnt") || return 1
  [ "$mine" != "$theirs" ]
}

if ! needs_namespace; then exec "${as_user[@]}" "$@"; fi
if ! own_namespace; then
  exec unshare --mount --propagation private -- "$BASH" "$0" "$user" "${paths[@]}" -- "$@"
fi
open_paths
exec "${as_user[@]}" "$@"
