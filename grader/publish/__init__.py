"""What the course publishes: the student handout, Gradescope's autograder zip, and the one list of public files."""
