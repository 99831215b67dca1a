package workers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

// browserPage is a page open in headless chromium, driven over the
// DevTools protocol: unlike --dump-dom (which waits for the page to go
// quiet, and a running workflow's page never does, it keeps polling),
// its text can be read as often as needed until the UI has rendered.
type browserPage struct {
	cmd *exec.Cmd
	ws  *websocket.Conn
	id  int
}

// openPage starts chromium on url; close it with close.
func openPage(ctx context.Context, bin, url, profile string) (*browserPage, error) {
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--window-size=1600,1000", "--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir="+profile, url)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &browserPage{cmd: cmd}
	// Chromium writes its DevTools port into the profile directory.
	var port string
	for deadline := time.Now().Add(30 * time.Second); port == ""; {
		if b, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort")); err == nil {
			port, _, _ = strings.Cut(string(b), "\n")
		}
		if port == "" {
			if time.Now().After(deadline) {
				p.close()
				return nil, fmt.Errorf("chromium: no DevTools port after 30s")
			}
			time.Sleep(100 * time.Millisecond) // polling a file chromium writes
		}
	}
	var targets []struct {
		Type, URL            string
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := http.Get("http://127.0.0.1:" + port + "/json")
		if err == nil {
			err = json.NewDecoder(res.Body).Decode(&targets)
			res.Body.Close()
		}
		for _, tg := range targets {
			if tg.Type == "page" && tg.WebSocketDebuggerURL != "" {
				ws, err := websocket.Dial(tg.WebSocketDebuggerURL, "", "http://127.0.0.1/")
				if err != nil {
					p.close()
					return nil, err
				}
				p.ws = ws
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.close()
			return nil, fmt.Errorf("chromium: no page target: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling chromium's target list
	}
}

// call sends one DevTools command and returns its result.
func (p *browserPage) call(method string, params any, result any) error {
	p.id++
	if err := websocket.JSON.Send(p.ws, map[string]any{"id": p.id, "method": method, "params": params}); err != nil {
		return err
	}
	_ = p.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := websocket.JSON.Receive(p.ws, &msg); err != nil {
			return err
		}
		if msg.ID != p.id {
			continue // an event
		}
		if msg.Error != nil {
			return fmt.Errorf("chromium %s: %s", method, msg.Error.Message)
		}
		return json.Unmarshal(msg.Result, result)
	}
}

// text is the page's rendered text, with that of its same-origin frames
// (the UI renders a workflow's markdown details in a sandboxed frame).
func (p *browserPage) text() (string, error) {
	var r struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
	}
	err := p.call("Runtime.evaluate", map[string]any{"expression": pageText, "returnByValue": true}, &r)
	return r.Result.Value, err
}

// screenshot writes a PNG of the page to path.
func (p *browserPage) screenshot(path string) error {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.call("Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return err
	}
	// The UI is flat colours: a 256-colour palette keeps it legible at a
	// third of the size, small enough to commit in docs/img/.
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return err
	}
	pal := image.NewPaletted(img.Bounds(), palette.Plan9)
	draw.Draw(pal, pal.Rect, img, img.Bounds().Min, draw.Src)
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, pal); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

const pageText = `[document, ...Array.from(document.querySelectorAll('iframe')).map(f => { try { return f.contentDocument } catch (e) { return null } })]
	.map(d => d && d.body ? d.body.innerText : '').join('\n')`

func (p *browserPage) close() {
	if p.ws != nil {
		p.ws.Close()
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}
