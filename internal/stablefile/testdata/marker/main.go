// Command marker prints the marker it was linked with (-ldflags=-X main.marker=...). The
// executable tests build two of them to tell which bytes an exec really ran.
package main

import "fmt"

var marker = "unset"

func main() { fmt.Println(marker) }
