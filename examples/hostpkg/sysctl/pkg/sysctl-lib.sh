# Shared by the sysctl package's steps and checks. POSIX sh with cat, mkdir, mv and rm only, so
# it runs on any host. Files go to /etc/sysctl.d/60-<package>-<key>; the interrupt
# (restart of systemd-sysctl.service) loads them, and the post-interrupt check reads the live
# values back from /proc/sys.
set -eu
dest=/etc/sysctl.d
prefix="$dest/60-$GPUFLEET_PACKAGE-"

# Writes every configMap file and removes the ones of keys that are gone. Re-runnable.
install_files() {
  mkdir -p "$dest"
  for f in "$GPUFLEET_CONFIG_DIR"/*.conf; do
    [ -e "$f" ] || continue
    cat "$f" > "$prefix${f##*/}.tmp"
    mv "$prefix${f##*/}.tmp" "$prefix${f##*/}"
  done
  for f in "$prefix"*.conf; do
    [ -e "$f" ] || continue
    [ -e "$GPUFLEET_CONFIG_DIR/${f#"$prefix"}" ] || rm -f "$f"
  done
}

# Every configMap file is installed with the same content, and nothing else is.
check_files() {
  for f in "$GPUFLEET_CONFIG_DIR"/*.conf; do
    [ -e "$f" ] || continue
    installed="$prefix${f##*/}"
    [ -e "$installed" ] && [ "$(cat "$f")" = "$(cat "$installed")" ] || {
      echo "$prefix${f##*/} differs from the configMap key ${f##*/}"
      return 1
    }
  done
  for f in "$prefix"*.conf; do
    [ -e "$f" ] || continue
    [ -e "$GPUFLEET_CONFIG_DIR/${f#"$prefix"}" ] || { echo "stale file $f"; return 1; }
  done
}

# Every "key = value" line of the installed files is the live kernel value.
check_live() {
  for f in "$prefix"*.conf; do
    [ -e "$f" ] || continue
    while IFS= read -r line || [ -n "$line" ]; do
      case "$line" in '' | '#'* | ';'*) continue ;; esac
      key=${line%%=*}
      value=${line#*=}
      key=$(echo $key)       # trim
      value=$(echo $value)   # trim, tabs to spaces
      path=""
      rest=$key
      while [ "${rest#*.}" != "$rest" ]; do
        path="$path${rest%%.*}/"
        rest=${rest#*.}
      done
      path="/proc/sys/$path$rest"
      if [ -e "$path" ]; then live=$(echo $(cat "$path")); else live="<missing>"; fi
      [ "$live" = "$value" ] || { echo "$key is $live, want $value"; return 1; }
    done < "$f"
  done
}

remove_files() {
  for f in "$prefix"*.conf; do
    [ -e "$f" ] && rm -f "$f"
  done
  return 0
}
