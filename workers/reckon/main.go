// Command reckon is the single binary of the reckon data system; see
// `reckon --help`.
package main

import (
	"os"

	"reckon/workers"
)

func main() { os.Exit(workers.Run()) }
