#!/usr/bin/env bash
# Tear down the one-machine cluster that k8s/cluster/up.sh started: exactly what its state records say,
# and nothing else. Idempotent: running it again, or without a cluster, does nothing and exits 0.
#
#   sudo k8s/cluster/down.sh
#
# Order: controllers stop, pods are deleted (the kubelet stops them and the CNI removes their network),
# the kubelet and kube-proxy stop, leftover containers are killed through containerd, containerd, the API
# server and etcd stop (SIGTERM, then SIGKILL, by recorded PID). Then mounts, network namespaces,
# interfaces, iptables chains, cgroup folders and paths the cluster created go, and sysctls are put back.
# The image store ($CACHE/containerd) and the logs ($CACHE/logs/cluster) are kept.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib.sh"

require_root down.sh
take_lock
t0=$(date +%s)

have_state=0
left=()  # what could not be removed; reported at the end
[ -d "$STATE_DIR" ] && have_state=1
ctr_() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }

stop_daemon() {
    local pid
    pid=$(recorded_pid "$1") || return 0
    log "stopping $1 (pid $pid)"
    stop_pid "$pid" "${2:-10}"
}

# Processes whose command line names this cluster's folders or containerd socket (shims, daemons whose
# PID file was lost); never matched by program name, so tests' own kube-apiserver/etcd are left alone.
our_processes() {
    local p cmd
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue
        cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") || continue
        case $cmd in
            *"$CLUSTER_DIR/"*|*"$CONTAINERD_SOCK"*) alive "$p" && echo "$p" ;;
        esac
    done
}

# Processes inside those folders (containers whose shim is gone).
cgroup_processes() {
    local d
    for d in $(our_cgroups); do find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true; done | sort -un
}

# ---------------------------------------------------------------- pods, then node daemons
if [ "$have_state" = 1 ]; then
    stop_daemon kube-controller-manager
    stop_daemon kube-scheduler
    if recorded_pid kubelet >/dev/null && recorded_pid kube-apiserver >/dev/null \
        && timeout 20 "$(component_path kubectl)" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout=10s \
            delete pods --all -A --grace-period=0 --force --wait=false >/dev/null 2>&1; then
        log "pods deleted; waiting for the kubelet to stop their containers and networks"
        for ((i = 0; i < 120; i++)); do
            [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
    stop_daemon kube-proxy
    stop_daemon kubelet
    if recorded_pid containerd >/dev/null; then
        for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
        sleep 0.5
        for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true; done
        for id in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$id" >/dev/null 2>&1 || true; done
    fi
    stop_daemon containerd 15
    stop_daemon kube-apiserver 15
    stop_daemon etcd 10
fi
for pid in $(our_processes) $(cgroup_processes); do
    log "stopping leftover pid $pid: $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-100)"
    stop_pid "$pid" 5
done

# ---------------------------------------------------------------- mounts and network namespaces
new_netns() {  # the cni-* namespaces that appeared since up.sh (none known without its state)
    local ns
    [ -f "$STATE_DIR/netns.before" ] || return 0
    for ns in /var/run/netns/cni-*; do
        [ -e "$ns" ] || continue
        ns=${ns##*/}
        grep -qx "$ns" "$STATE_DIR/netns.before" || echo "$ns"
    done
}
our_mounts() {  # deepest first
    local prefixes=("$CLUSTER_DIR" "$RUN_DIR" "$CONTAINERD_ROOT") ns
    grep -qx /run/containerd "$STATE_DIR/paths.created" 2>/dev/null && prefixes+=(/run/containerd)
    for ns in $(new_netns); do prefixes+=("/run/netns/$ns" "/var/run/netns/$ns"); done
    awk '{print $5}' /proc/self/mountinfo | while read -r m; do
        m=$(printf '%b' "${m//\\/\\0}")   # mountinfo escapes spaces as \040
        for p in "${prefixes[@]}"; do
            case $m in "$p"|"$p"/*) echo "$m"; break ;; esac
        done
    done | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-
}
for m in $(our_mounts); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: cannot unmount $m"
done
for ns in $(new_netns); do ip netns delete "$ns" 2>/dev/null || rm -f "/var/run/netns/$ns"; done

# ---------------------------------------------------------------- interfaces
links=("$NODE_VETH" "$CNI_BRIDGE")
[ -f "$STATE_DIR/links.created" ] && mapfile -t -O ${#links[@]} links <"$STATE_DIR/links.created"
if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
    for l in $(ip -o link show master "$CNI_BRIDGE" | awk -F': ' '{print $2}' | cut -d@ -f1); do links+=("$l"); done
fi
for l in $(printf '%s\n' "${links[@]}" | sort -u); do
    ip link show "$l" >/dev/null 2>&1 || continue
    log "deleting interface $l"
    ip link delete "$l" 2>/dev/null || log "warning: cannot delete interface $l"
done

# ---------------------------------------------------------------- iptables chains
if [ -x "$(component_path kube-proxy)" ] && [ "$have_state" = 1 ]; then
    "$(component_path kube-proxy)" --cleanup >/dev/null 2>&1 || true
fi
# Chains named KUBE-* or CNI-* that were not there before up.sh (kubelet, kube-proxy, the CNI bridge and
# portmap plugins make them); first the rules that jump to them, then the chains.
remove_chains() {  # iptables|ip6tables table
    local ipt=$1 t=$2 before=$STATE_DIR/$1.chains.before chains rule c
    command -v "$ipt-save" >/dev/null || return 0
    chains=$("$ipt-save" -t "$t" 2>/dev/null | awk '/^:(KUBE-|CNI-)/ {print substr($1, 2)}' | while read -r c; do
        grep -qx "$t $c" "$before" 2>/dev/null || echo "$c"
    done)
    [ -n "$chains" ] || return 0
    log "removing $ipt -t $t chains: $(echo $chains | wc -w)"
    { "$ipt" -t "$t" -S 2>/dev/null | grep '^-A ' || true; } | while read -r rule; do
        for c in $chains; do
            if [[ " $rule " == *" -j $c "* || " $rule " == *" -g $c "* ]]; then
                eval "\"$ipt\" -t \"$t\" -D ${rule#-A }" 2>/dev/null || true
                break
            fi
        done
    done
    for c in $chains; do "$ipt" -t "$t" -F "$c" 2>/dev/null || true; done
    for c in $chains; do "$ipt" -t "$t" -X "$c" 2>/dev/null || left+=("$ipt -t $t chain $c"); done
}
if [ "$have_state" = 1 ]; then
    for ipt in iptables ip6tables; do for t in filter nat mangle raw; do remove_chains "$ipt" "$t"; done; done
fi

# ---------------------------------------------------------------- cgroup folders
for d in $(our_cgroups); do
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ ! -d "$d" ] || left+=("cgroup folder $d")
done

# ---------------------------------------------------------------- sysctls
# Counters and read-only keys never count; a key printed on several lines (a list) is left alone.
VOLATILE='^(fs\.(aio-nr|dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.(ns_last_pid|random\.)|net\.netfilter\.nf_conntrack_count)'
if [ -f "$STATE_DIR/sysctl.before" ]; then
    declare -A now=() lines=()
    while IFS= read -r line; do
        key=${line%% = *}; now[$key]=${line#* = }; lines[$key]=$(( ${lines[$key]:-0} + 1 ))
    done < <(sysctl -a 2>/dev/null)
    while IFS= read -r line; do
        key=${line%% = *}; old=${line#* = }
        [[ $key =~ $VOLATILE ]] && continue
        [ "${now[$key]+set}" = set ] || continue          # gone with an interface
        [ "${lines[$key]}" = 1 ] || continue
        [ "${now[$key]}" = "$old" ] && continue
        [ -w "/proc/sys/${key//.//}" ] || continue
        if sysctl -q -w "$key=$old" 2>/dev/null; then
            log "sysctl $key: ${now[$key]} -> $old (restored)"
        else
            log "warning: cannot restore sysctl $key to '$old'"
        fi
    done <"$STATE_DIR/sysctl.before"
fi

# ---------------------------------------------------------------- paths and the cluster folder
if [ -f "$STATE_DIR/paths.created" ]; then
    while read -r p; do
        [ -e "$p" ] || continue
        log "removing $p (created by the cluster)"
        rm -rf --one-file-system "$p" || log "warning: cannot remove $p"
    done <"$STATE_DIR/paths.created"
fi
rm -rf --one-file-system "$RUN_DIR" "$CLUSTER_DIR" 2>/dev/null || log "warning: cannot remove $CLUSTER_DIR"

# ---------------------------------------------------------------- what is left?
[ -z "$(our_processes)" ] || left+=("processes $(our_processes | tr '\n' ' ')")
for l in "$NODE_VETH" "$CNI_BRIDGE"; do ip link show "$l" >/dev/null 2>&1 && left+=("interface $l"); done
[ -z "$(our_mounts)" ] || left+=("mounts $(our_mounts | head -3 | tr '\n' ' ')")
[ ! -d "$CLUSTER_DIR" ] || left+=("folder $CLUSTER_DIR")
if [ ${#left[@]} -gt 0 ]; then
    die "cluster-down left: ${left[*]}"
fi
log "cluster down in $(( $(date +%s) - t0 ))s (kept: images in $CONTAINERD_ROOT, logs in $LOG_DIR)"
