// Package snippets holds one test, TestReadmeSnippets: every Go snippet of
// the READMEs that show the library's API is compiled code, the body of an
// Example function of the package it documents (its readme_example_test.go),
// so that an API change that breaks a snippet breaks the build.
package snippets
