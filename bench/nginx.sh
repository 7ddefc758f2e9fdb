# nginx.sh — sourced by the benchmarks that serve files with nginx
# (Debian's package): nginx_serve DIR ROOT PROBE [DIRECTIVES] starts it on a
# free port of 127.0.0.1 serving ROOT, with its configuration, pid and logs
# in DIR/nginx and DIRECTIVES added to the server block, waits until PROBE
# (a path) answers, and sets $base; nginx_stop DIR stops it and waits.

nginx_serve() {
	local dir=$1 root=$2 probe=$3 extra=${4:-} port user="" bin
	bin=$(command -v nginx || echo /usr/sbin/nginx)
	[[ $(id -u) == 0 ]] && user="user root;"
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	rm -rf "$dir/nginx" && mkdir -p "$dir/nginx"
	cat >"$dir/nginx/nginx.conf" <<CONF
$user
worker_processes 1;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log;
events { worker_connections 512; }
http {
	access_log off;
	client_body_temp_path $dir/nginx/body;
	proxy_temp_path $dir/nginx/proxy;
	fastcgi_temp_path $dir/nginx/fastcgi;
	uwsgi_temp_path $dir/nginx/uwsgi;
	scgi_temp_path $dir/nginx/scgi;
	types { text/html html; text/css css; application/javascript js; }
	server { listen 127.0.0.1:$port; root $root; $extra }
}
CONF
	"$bin" -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -e "$dir/nginx/error.log"
	base="http://127.0.0.1:$port"
	for _ in $(seq 100); do
		curl -sf -o /dev/null "$base/$probe" && return 0
		sleep 0.1
	done
	echo "nginx did not answer $base/$probe" >&2
	return 1
}

nginx_stop() {
	local pid
	[[ -f $1/nginx/nginx.pid ]] || return 0
	pid=$(cat "$1/nginx/nginx.pid")
	kill "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}
