# bash completion for herald (issue 21). Install: source it from ~/.bashrc, or copy it to
# /etc/bash_completion.d/herald. It completes commands, subcommands and each command's options,
# read from `herald <command> --help` so it never falls behind the binary.
_herald() {
    local current=${COMP_WORDS[COMP_CWORD]}
    local commands="dev run validate-job validate migrate doctor seed send tail jobs apps channels topics dlq dev-broker sim bench --version --help"
    if [ "$COMP_CWORD" -eq 1 ]; then
        mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$current")
        return
    fi
    local command=${COMP_WORDS[1]}
    local subcommands=""
    case "$command" in
        jobs) subcommands="list show watch cancel resume" ;;
        apps) subcommands="add update show list rekey" ;;
        channels) subcommands="list set delete" ;;
        topics) subcommands="create" ;;
        dlq) subcommands="replay" ;;
        tail) subcommands="results metrics dlq" ;;
        sim) subcommands="token" ;;
        bench) subcommands="http2 kafka audience pipeline poison" ;;
    esac
    if [ "$COMP_CWORD" -eq 2 ] && [ -n "$subcommands" ] && [[ "$current" != -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$subcommands" -- "$current")
        return
    fi
    if [[ "$current" == -* ]]; then
        local words=("${COMP_WORDS[@]:1:2}")
        local options
        options=$(herald "${words[@]}" --help 2>/dev/null | grep -oE -- '--[a-z0-9][a-z0-9-]*' | sort -u)
        mapfile -t COMPREPLY < <(compgen -W "$options --help" -- "$current")
        return
    fi
    mapfile -t COMPREPLY < <(compgen -f -- "$current")
}
complete -F _herald herald
