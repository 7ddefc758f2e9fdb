// Package render downloads pages with a headless browser.
package render
