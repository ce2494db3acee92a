package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed ui
var uiFiles embed.FS

// routesUI serves the dashboard: static files embedded in the binary that
// read the JSON API; nothing is fetched from the network.
func (s *Server) routesUI() {
	sub, _ := fs.Sub(uiFiles, "ui")
	files := http.FileServerFS(sub)
	s.mux.Handle("GET /ui/", http.StripPrefix("/ui/", files))
	s.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
}
